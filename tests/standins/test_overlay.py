"""``catalog/overlays/standins.yaml`` is validated on load: each mistake is one error naming file, line and entry."""

from __future__ import annotations

import pytest

from codegen.load import STANDIN_PACKAGES, load_standins
from codegen.schema import CatalogError

PACKAGE = "flash_attn: {policy: package, distribution: flash-attn, computes: torch.nn.functional.softmax}\n"


@pytest.mark.parametrize(("record", "message"), [
    ("flash_attn.flash_attn_func: {signature: '(q, k', computes: x}", "is not a parameter list"),
    ("flash_attn.nothing_here: {signature: '(q)', computes: x}", "does not define nothing_here"),
    ("flash_attn.nope.f: {signature: '(q)', computes: x}", "no stand-in module flash_attn.nope"),
    ("apex.normalization.FusedLayerNorm: {signature: '(x)', computes: x}", "'apex' is not a package of this file"),
    ("flash_attn.flash_attn_func: {signature: '(q)', computes: x, reference: attention, grid: {colour: [1]}}",
     "colour is neither a parameter"),
    ("flash_attn.flash_attn_func: {signature: '(q)', computes: x, grid: {q: [1]}}", "a grid needs the reference"),
    ("flash_attn.flash_attn_func: {signature: '(q)', computes: x, frobnicate: 1}", "unknown field 'frobnicate'"),
    ("flash_attn.layers: {policy: missing, signature: '(q)', computes: x}", "apply to covered names"),
    ("flash_attn.flash_attn_func: {signature: '(q)'}", "computes"),
])
def test_a_bad_record_is_one_error_naming_its_line(tmp_path, record, message):
    path = tmp_path / "standins.yaml"
    path.write_text(PACKAGE + "\n" + record + "\n")
    with pytest.raises(CatalogError) as raised:
        load_standins(path, STANDIN_PACKAGES)
    name = record.partition(":")[0]
    assert f"standins.yaml:3 (entry {name}): " in str(raised.value) and message in str(raised.value)


def test_the_catalog_overlay_loads_and_names_every_package():
    from codegen.load import CATALOG_DIR

    records = load_standins(CATALOG_DIR / "overlays" / "standins.yaml")
    assert {r.name for r in records if r.rule.policy == "package"} == {"flash_attn", "xformers", "apex",
                                                                      "selective_scan_cuda", "causal_conv1d_cuda"}
