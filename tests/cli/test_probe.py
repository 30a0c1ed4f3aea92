"""``torchdevice probe`` measures the MPS column of the tables: on the simulated Mac, which refuses per the table,
the probes confirm it; where the device differs from the table, they say how; ``catalog show``
prints an entry's limits."""

from __future__ import annotations

import json

import pytest
import torch

from torchdevice.cli import catalog, main, probe
from torchdevice.device import limits, probes
from torchdevice.records import CatalogRow
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import NO_FLOAT64, chosen

MISSING = ("aten::_adaptive_avg_pool3d", "aten::cummax")


def Mac(macos: tuple[int, int] = (14, 0), overloads: tuple[str, ...] | None = None,
        missing: tuple[str, ...] = ()) -> SimulatedKernels:
    """The simulated Mac refusing the limits of ``overloads`` (default: all) and missing the kernels of ``missing``."""
    return SimulatedKernels(chosen(limited=limits.limited() if overloads is None else overloads, macos=macos,
                                   missing_overloads=missing, no_float64=NO_FLOAT64, hosted=True))


def by_subject(outcomes: list[probes.Outcome]) -> dict[str, probes.Outcome]:
    return {o.subject: o for o in outcomes}


@pytest.mark.parametrize("macos", [(14, 0), (15, 2)])
def test_a_mac_that_refuses_as_the_table_says_confirms_it(macos):
    with Mac(macos, missing=MISSING) as target:
        outcomes = by_subject(probes.probe_limits(target.device, macos))
        missing = probes.probe_missing(target.device, MISSING)
    assert {name for name, o in outcomes.items() if o.verdict == "contradicted"} == set()
    # a limit MPS meets with other values than the CPU's: the simulation computes what MPS computes
    assert outcomes["adaptive_max_pool_not_divisible"].verdict == "confirmed"
    assert all(o.verdict == "confirmed" for o in missing)
    tiled, conv = outcomes["scatter_reduce_int64_min_max_before_macos_15"], outcomes["conv_output_above_65536"]
    if macos < (15, 0):
        assert tiled.expected.startswith("MPS to refuse it") and conv.expected.startswith("MPS to refuse it")
    else:  # a newer Mac runs them: expected so, and confirmed
        assert tiled.expected == "MPS to run it" and conv.expected == "MPS to run it"
    assert tiled.verdict == conv.verdict == "confirmed"
    assert outcomes["masked_fill_above_2_32"].verdict == "not probed"


def test_a_mac_that_differs_from_the_table_contradicts_it():
    """This Mac has an index_reduce for int64 and a kernel the table says is missing; it refuses scatter_reduce
    amin/amax of int64 on macOS 15, which the table says runs there."""
    others = [name for name in limits.limited() if not name.startswith("aten::index_reduce")]
    with Mac((14, 0), overloads=tuple(others)) as target:
        outcomes = by_subject(probes.probe_limits(target.device, (15, 0)))
        missing = by_subject(probes.probe_missing(target.device, ["aten::erfinv"]))
    assert outcomes["index_reduce_int64"].verdict == "contradicted"
    assert outcomes["index_reduce_int64"].observed == "it ran"
    scatter = outcomes["scatter_reduce_int64_min_max_before_macos_15"]
    assert scatter.verdict == "contradicted" and scatter.expected == "MPS to run it"
    assert scatter.observed.startswith("it refused it (RuntimeError: scatter_reduce(amin/amax) on int64 requires")
    erfinv = missing["aten::erfinv"]
    assert erfinv.verdict == "contradicted" and erfinv.observed == "it has one (it ran)"


def test_missing_kernels_are_probed_with_arguments_from_their_schemas():
    args, kwargs = probes.sample(torch.ops.aten._cudnn_rnn_backward.default, torch.device("cpu"))
    assert [len(a) for a in args if isinstance(a, list) and a and isinstance(a[0], bool)] == [4]  # bool[4]
    _, kwargs = probes.sample(torch.ops.aten._cudnn_init_dropout_state.default, torch.device("meta"))
    assert kwargs == {} or kwargs.get("device") == torch.device("meta")


def test_the_report_and_its_json(tmp_path, capsys):
    with Mac(missing=MISSING) as target:
        found = probe.measure(target.device, (14, 0), MISSING)
    found["target"] = "simulated-mac"
    text = probe.report(found)
    lines = text.splitlines()
    assert lines[0].startswith("torchdevice probe: simulated-mac (simulated:0) on macOS 14.0, torch ")
    assert lines[1].startswith("limits: ") and " confirmed, 0 contradicted, " in lines[1]
    assert "missing kernels: 2 confirmed, 0 contradicted, 0 not probed" in text
    assert len(probe.report(found, every=True).splitlines()) > len(lines)
    json.dumps(found)  # the record --json writes


def test_no_mps_here_says_what_to_run(capsys):
    if torch.backends.mps.is_available():
        pytest.skip("MPS is available here")
    assert main(["probe"]) == 2
    assert "`--target mps-sim` probes the simulated Mac" in capsys.readouterr().err


def test_catalog_show_prints_an_entrys_limits():
    header, entries = catalog.load()
    by_name: dict[str, CatalogRow] = {e.name: e for e in entries}
    overload = catalog.format_entry(by_name["torch.ops.aten._adaptive_avg_pool2d.default"])
    assert ("mps limit      adaptive pool input size not a multiple of the output size: MPS raises NotImplementedError "
            "(adaptive_avg_pool_not_divisible); CUDA runs it; runs on the CPU") in overload
    public = catalog.format_entry(by_name["torch.linalg.lu_factor"])
    assert ("mps limit      aten::linalg_lu_factor: LU without pivoting: MPS raises RuntimeError "
            "(lu_factor_without_pivoting); CUDA runs it; the CPU refuses it too: an error names the limit") in public
    assert "mps limit" not in catalog.format_entry(by_name["torch.zeros"])
