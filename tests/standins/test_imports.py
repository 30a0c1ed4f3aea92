"""Which package ``import flash_attn`` gives, and how what is not covered fails: in fresh interpreters for
what depends on the process (plain python, a real package installed, uninstall), in process otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchdevice
from torchdevice.reporting import counts as report


def python(code: str, *, path: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    environment.update(OMP_NUM_THREADS="1", **(env or {}))
    if path:
        environment["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.processes
def test_plain_python_is_unaffected():
    done = python("""
        import torchdevice, torch
        for name in ("flash_attn", "xformers", "apex", "selective_scan_cuda", "causal_conv1d_cuda"):
            try:
                __import__(name)
            except ModuleNotFoundError as exc:
                print(exc.name)
    """)
    assert done.stdout.split() == ["flash_attn", "xformers", "apex", "selective_scan_cuda", "causal_conv1d_cuda"], \
        done.stderr


@pytest.mark.processes
def test_an_installed_package_is_never_shadowed(tmp_path):
    (tmp_path / "flash_attn").mkdir()
    (tmp_path / "flash_attn" / "__init__.py").write_text("REAL = True\n")
    program = tmp_path / "program.py"
    program.write_text("import flash_attn, xformers\nprint(getattr(flash_attn, 'REAL', False), xformers.__file__)\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    done = subprocess.run([sys.executable, "-m", "torchdevice", "run", str(program)], capture_output=True, text=True,
                          env={**environment, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}, timeout=300)
    real, xformers_file = done.stdout.split()
    assert real == "True" and "standins" in xformers_file, done.stderr
    # a child process that imports the package before torch (the start-up hook installs first)
    child = python("import flash_attn, apex; print(getattr(flash_attn, 'REAL', False), 'standins' in apex.__file__)",
                   path=str(tmp_path), env={"TORCHDEVICE_INSTALL": "cpu"})
    assert child.stdout.split() == ["True", "True"], child.stderr


@pytest.mark.processes
def test_uninstall_takes_the_finder_away_and_leaves_imported_modules():
    done = python("""
        import sys, torchdevice
        torchdevice.install("cpu")
        import xformers.ops
        torchdevice.uninstall()
        print("xformers.ops" in sys.modules, xformers.ops.memory_efficient_attention.__module__)
        try:
            import apex
        except ModuleNotFoundError:
            print("apex absent")
    """)
    assert done.stdout.splitlines() == ["True xformers.ops.fmha", "apex absent"], done.stderr


@pytest.mark.parametrize(("statement", "names"), [
    ("from apex.optimizers import FusedLAMB", ("apex.optimizers.FusedLAMB", "torch.optim.AdamW")),
    ("from apex.parallel import DistributedDataParallel",
     ("apex.parallel", "torch.nn.parallel.DistributedDataParallel")),
    ("import flash_attn.layers.rotary", ("flash_attn.layers", "torch.polar")),
    ("from flash_attn.ops.triton.layer_norm import layer_norm_fn",
     ("flash_attn.ops", "torch.nn.functional.layer_norm")),
    ("from xformers.ops import unbind", ("xformers.ops.unbind", "torch.unbind")),
    ("from apex.amp import half_function", ("apex.amp.half_function", "torch.autocast")),
    ("from flash_attn import flash_attn_unpadded_func", ("flash_attn.flash_attn_unpadded_func", "scaled_dot_product")),
])
def test_what_is_not_covered_fails_at_import_naming_it_and_the_torch_equivalent(statement, names, standin):
    with pytest.raises(ImportError) as raised:
        exec(statement, {})
    message = str(raised.value)
    assert all(name in message for name in names), message
    assert "not covered by torchdevice's stand-in" in message


def test_probing_an_uncovered_name_is_an_attribute_error(standin):
    import apex.optimizers
    import xformers.ops

    assert not hasattr(xformers.ops, "MemoryEfficientAttentionFlashAttentionOp")
    assert getattr(apex.optimizers, "FusedLAMB", None) is None
    with pytest.raises(AttributeError, match="torch.optim.AdamW"):
        apex.optimizers.FusedLAMB  # noqa: B018


def test_report_lists_the_standins_used(standin):
    report.reset()
    q = torch.randn(1, 4, 2, 8)
    standin("flash_attn.flash_attn_func")(q, q, q)
    standin("flash_attn.flash_attn_func")(q, q, q, causal=True)
    standin("apex.normalization.FusedLayerNorm")(8)(q)
    assert torchdevice.report()["standins"] == {"flash_attn.flash_attn_func": {"cpu": 2},
                                                 "apex.normalization.FusedLayerNorm": {"cpu": 1}}


def test_arguments_not_covered_are_refused_clearly(standin):
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(ValueError, match="block_table"):
        standin("flash_attn.flash_attn_with_kvcache")(q, q, q, block_table=torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match="'O2'.*torch.autocast"):
        standin("apex.amp.initialize")(torch.nn.Linear(2, 2), opt_level="O2")
    with pytest.raises(RuntimeError, match="AMSGrad"):
        standin("apex.optimizers.FusedAdam")([torch.zeros(1, requires_grad=True)], amsgrad=True)


def test_return_attn_probs_gives_the_softmax_and_its_logsumexp(standin):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 3, 8), torch.randn(2, 7, 3, 8), torch.randn(2, 7, 3, 8)
    out, lse, probs = standin("flash_attn.flash_attn_func")(q, k, v, causal=True, return_attn_probs=True)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / 8 ** 0.5
    keep = torch.ones(5, 7, dtype=torch.bool).tril(2)
    scores = scores.masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    torch.testing.assert_close(probs, torch.softmax(scores, -1))
    torch.testing.assert_close(out, standin("flash_attn.flash_attn_func")(q, k, v, causal=True))


def test_dropout_applies_whenever_asked(standin):
    q = torch.randn(1, 16, 2, 8)
    attn = standin("flash_attn.flash_attn_func")
    torch.manual_seed(1)
    a = attn(q, q, q, dropout_p=0.5)
    assert not torch.allclose(a, attn(q, q, q)) and torch.isfinite(a).all()


@pytest.mark.parametrize(("lengths_q", "lengths_k", "causal", "heads_k"), [
    ([3, 0, 5], [3, 0, 5], True, 4), ([3, 2, 5], [4, 1, 6], False, 2), ([1, 7], [1, 7], True, 1)],
    ids=["causal-with-an-empty-sequence", "cross-attention", "causal-mqa"])
def test_varlen_one_sequence_at_a_time_equals_attention_per_sequence(standin, lengths_q, lengths_k, causal, heads_k):
    """On the CPU, plain varlen attention runs sequence by sequence (no padded copies): each sequence's output is
    what attention over that sequence alone gives."""
    torch.manual_seed(0)
    cu_q, cu_k = (torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32) for n in (lengths_q,
                                                                                                  lengths_k))
    q = torch.randn(sum(lengths_q), 4, 16)
    k, v = torch.randn(sum(lengths_k), heads_k, 16), torch.randn(sum(lengths_k), heads_k, 16)
    out = standin("flash_attn.flash_attn_varlen_func")(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                                      causal=causal)
    attn = standin("flash_attn.flash_attn_func")
    for i, n_q in enumerate(lengths_q):
        if n_q:
            alone = attn(q[None, cu_q[i]:cu_q[i + 1]], k[None, cu_k[i]:cu_k[i + 1]], v[None, cu_k[i]:cu_k[i + 1]],
                         causal=causal)[0]
            torch.testing.assert_close(out[cu_q[i]:cu_q[i + 1]], alone, rtol=1e-5, atol=1e-6)
