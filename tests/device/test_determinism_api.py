"""CUDA's determinism alerts as the runtime reads them: the look-up by overload, each condition on real arguments
(CPU tensors: only their metadata is read), and what a call does under ``torch.use_deterministic_algorithms``:
nothing when off, torch's own RuntimeError when on, torch's own UserWarning with ``warn_only``, word for word as the
CPU's kernels raise the same alerts."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

from torchdevice.device import determinism

aten = torch.ops.aten


@pytest.fixture
def mode() -> Iterator[None]:
    """Whatever a test sets, deterministic algorithms are as they were afterwards."""
    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), \
        torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def only(op: torch._ops.OpOverload) -> determinism.Alert:
    (alert,) = determinism.alerts_of(op)
    return alert


def unpool_args() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    pooled, indices = F.max_pool2d(torch.randn(1, 1, 4, 4), 2, return_indices=True)
    return pooled, indices, [4, 4]


def test_most_ops_have_none_and_the_lookup_is_by_overload():
    assert determinism.alerts_of(aten.add.Tensor) == ()
    assert determinism.alerts_of(aten.histc.default) is determinism.alerts_of(aten.histc.default)
    assert only(aten.histc.out).name == "_histc_cuda with floating point input"
    assert only(aten.scatter_reduce_.two).name == "scatter_reduce_cuda_prod_"
    assert "aten::put_" in determinism.alerting() and "aten::cumsum" not in determinism.alerting()


def test_conditions_read_the_arguments_as_the_dispatcher_hands_them():
    histc = only(aten.histc.default)
    assert histc.applies((torch.ones(3),), {}) and histc.applies((torch.ones(3, dtype=torch.float16), 10), {})
    assert not histc.applies((torch.ones(3, dtype=torch.int64),), {})
    bincount = only(aten.bincount.default)
    counts = torch.tensor([0, 1, 1])
    assert bincount.applies((counts, torch.ones(3)), {}) and bincount.applies((counts,), {"weights": torch.ones(3)})
    assert not bincount.applies((counts,), {}) and not bincount.applies((counts, None), {})
    prod = only(aten.scatter_reduce.two)
    self, index, src = torch.zeros(3), torch.tensor([0, 1, 1]), torch.ones(3)
    assert prod.applies((self, 0, index, src, "prod"), {})
    assert prod.applies((self, 0, index, src), {"reduce": "prod", "include_self": False})
    assert not prod.applies((self, 0, index, src, "sum"), {})
    assert not prod.applies((self, 0, index[:0], src[:0], "prod"), {})  # nothing scattered: no kernel runs
    multiply = only(aten.scatter_.reduce)
    assert multiply.applies((self, 0, index, src), {"reduce": "multiply"})
    assert not multiply.applies((self, 0, index, src), {"reduce": "add"})
    nll = only(aten.nll_loss2d_forward.default)
    logits, target = torch.randn(2, 3, 4, 4), torch.zeros(2, 4, 4, dtype=torch.long)
    assert nll.applies((logits, target, None, 1, -100), {}) and not nll.applies((logits, target, None, 0, -100), {})
    bag = only(aten._embedding_bag_dense_backward.default)
    t = torch.zeros(2)
    assert bag.applies((t, t, t, t, t, 10, False, 2, None), {}) and not bag.applies((t, t, t, t, t, 10, False, 0), {})
    assert only(aten.put_.default).applies((torch.zeros(3), torch.tensor([0]), torch.ones(1), True), {})
    assert not histc.applies((), {})  # a call the kernel refuses for itself: not an alert


def test_nothing_happens_while_deterministic_algorithms_are_off(mode):
    torch.use_deterministic_algorithms(False)
    only(aten.max_unpool2d.default).check(unpool_args(), {})
    determinism.check(aten.histc.default, (torch.ones(3),), {})


def real_error(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError) as info:
        call()
    return str(info.value)


def real_warning(call) -> str:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    (warning,) = [w for w in caught if "deterministic" in str(w.message)]
    assert warning.category is UserWarning
    return str(warning.message)


def test_raises_torchs_own_error_word_for_word(mode):
    torch.use_deterministic_algorithms(True)
    args = unpool_args()
    ours = real_error(lambda: only(aten.max_unpool2d.default).check(args, {}))
    assert ours == real_error(lambda: aten.max_unpool2d.default(*args))  # the CPU kernel's alert of the same name
    put = only(aten.put_.default)
    put_args = (torch.zeros(3), torch.tensor([0]), torch.ones(1), False)
    assert real_error(lambda: put.check(put_args, {})) == real_error(lambda: aten.put_.default(*put_args))
    histc = real_error(lambda: determinism.check(aten.histc.default, (torch.ones(3),), {}))
    assert histc.startswith("_histc_cuda with floating point input does not have a deterministic implementation")
    determinism.check(aten.histc.default, (torch.ones(3, dtype=torch.int32),), {})  # the condition does not hold


def test_warns_torchs_own_warning_word_for_word_with_warn_only(mode):
    torch.use_deterministic_algorithms(True, warn_only=True)
    args = unpool_args()
    ours = real_warning(lambda: only(aten.max_unpool2d.default).check(args, {}))
    # torch's Python bindings turn its C++ warnings into Python's (torch.ops' calls leave them on stderr)
    assert ours == real_warning(lambda: F.max_unpool2d(args[0], args[1], 2, output_size=args[2]))
    assert "(Triggered internally at " in ours  # as every warning of torch's C++ code
    self, index, source = torch.zeros(3), torch.tensor([0]), torch.ones(1)
    assert real_warning(lambda: only(aten.put_.default).check((self, index, source), {})) == \
        real_warning(lambda: self.put_(index, source))


def test_the_message_is_the_one_torchs_python_side_formats_too(mode):
    from torch._prims_common import alert_not_deterministic

    torch.use_deterministic_algorithms(True)
    assert real_error(lambda: alert_not_deterministic("median CUDA with indices output")) == \
        determinism.message("median CUDA with indices output")


def test_the_warnings_text_asked_for_while_off_is_not_kept_short(mode):
    torch.use_deterministic_algorithms(False)
    determinism._SUFFIX.clear()
    assert not determinism.message("x", warn_only=True).endswith(".)")
    torch.use_deterministic_algorithms(True, warn_only=True)
    assert determinism.message("x", warn_only=True).endswith(".)")
