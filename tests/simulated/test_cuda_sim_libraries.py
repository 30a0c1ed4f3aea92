"""What a GPU's torch has and a CPU build lacks, on the simulated GPU: cuDNN's answers, NCCL's collectives (which
``nn.DataParallel`` sums its gradients with), and torch's C++ messages naming the device as ``cuda:i``. Lines written
the way programs write them, against the same lines on the cpu target or the messages torch's sources write on a
GPU."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import torchdevice
from torchdevice.simulated import libraries

BUILD = (torch.backends.cudnn.is_available(), torch.backends.cudnn.version(), torch.backends.cudnn.benchmark_limit)
"""This torch build's own answers (a CPU build: no cuDNN; a CUDA build: its cuDNN, also without a GPU)."""
CUDNN, NCCL = (BUILD[1], torch.cuda.nccl.version()) if torch.version.cuda else (libraries.CUDNN_VERSION,
                                                                                  libraries.NCCL_VERSION)
"""What a GPU with this release's CUDA wheel answers: a CUDA build's own versions, else those its wheel requires."""


@pytest.fixture
def gpu():
    with torchdevice.installed("cuda-sim") as device:
        yield device


@pytest.fixture
def settable_flags():
    """torch.backends' flags settable as in a program (importing torch's own test utilities, as another test of
    this process may, freezes them)."""
    with torch.backends.__allow_nonbracketed_mutation():
        yield


@pytest.fixture
def two_gpus():
    with torchdevice.installed("cuda-sim", devices=2) as device:
        yield device


def test_cudnn_is_there_as_on_a_gpu(gpu, settable_flags):
    x = torch.randn(4, 3, device="cuda")
    assert torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled
    version = torch.backends.cudnn.version()
    assert isinstance(version, int) and version == CUDNN == libraries.CUDNN_VERSION and version // 10000 == 9
    assert torch.backends.cudnn.is_acceptable(x) and torch.backends.cudnn.is_acceptable(x.half())
    assert not torch.backends.cudnn.is_acceptable(x.long()) and not torch.backends.cudnn.is_acceptable(x.cpu())
    assert not torch.backends.cudnn.is_acceptable(x.bfloat16())  # torch's list: half, float, double
    assert torch.backends.cudnn.benchmark_limit == 10
    torch.backends.cudnn.benchmark = True
    try:
        assert torch.backends.cudnn.benchmark
        with torch.backends.cudnn.flags(enabled=False, benchmark_limit=3):
            assert not torch.backends.cudnn.enabled and not torch.backends.cudnn.is_acceptable(x)
            assert torch.backends.cudnn.benchmark_limit == 3
        assert torch.backends.cudnn.enabled and torch.backends.cudnn.benchmark_limit == 10
        assert torch.backends.cudnn.is_acceptable(x)
    finally:
        torch.backends.cudnn.benchmark = False


def test_the_cpu_target_keeps_the_builds_answers():
    with torchdevice.installed("cpu"):
        assert (torch.backends.cudnn.is_available(), torch.backends.cudnn.version()) == BUILD[:2]
        assert not torch.backends.cudnn.is_acceptable(torch.ones(2, device="cuda"))
    with torchdevice.installed("cuda-sim"):
        assert torch.backends.cudnn.version() == CUDNN
    assert (torch.backends.cudnn.is_available(), torch.backends.cudnn.version(),
            torch.backends.cudnn.benchmark_limit) == BUILD


def test_this_cudnn_refuses_cards_older_than_turing_as_torch_does():
    """From cuDNN 9.11 (torch 2.11's wheel), torch refuses cards below SM 7.5; 2.10's cuDNN 9.10 loads on them."""
    with torchdevice.installed("cuda-sim", gpu="V100-16GB"):
        if CUDNN >= 91100:
            refused = rf"^cuDNN version {CUDNN} is not compatible with devices with SM < 7\.5"
            with pytest.raises(RuntimeError, match=refused):
                torch.backends.cudnn.version()
        else:
            assert torch.backends.cudnn.version() == CUDNN
    with torchdevice.installed("cuda-sim", gpu="A100-40GB"):
        assert torch.backends.cudnn.version() == CUDNN


def train_recurrent(layer: str) -> list[torch.Tensor]:
    """A few steps of a bidirectional two-layer recurrent model on ``"cuda"``, with ``flatten_parameters`` as
    programs call it (after ``.cuda()``, and each forward as ``DataParallel`` users do): its outputs and weights."""
    torch.manual_seed(0)
    kind = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}[layer]
    rnn = kind(5, 8, num_layers=2, bidirectional=True, batch_first=True).cuda()
    rnn.flatten_parameters()
    head = torch.nn.Linear(16, 3).cuda()
    optimizer = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    x, y = torch.randn(3, 4, 6, 5), torch.randint(0, 3, (3, 4))
    lengths = torch.tensor([6, 4, 3, 2])
    seen = []
    for batch, target in zip(x, y, strict=True):
        rnn.flatten_parameters()
        packed = torch.nn.utils.rnn.pack_padded_sequence(batch.cuda(), lengths, batch_first=True)
        out, _ = rnn(packed)
        padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        loss = F.cross_entropy(head(padded[:, 0]), target.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        seen.append(padded.detach().cpu())
    return [*seen, *(p.detach().cpu() for p in rnn.parameters())]


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_recurrent_layers_with_cudnn_train_as_on_the_cpu_target(layer):
    with torchdevice.installed("cpu"):
        expected = train_recurrent(layer)
    with torchdevice.installed("cuda-sim"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.backends.cudnn.is_acceptable(torch.nn.LSTM(2, 2).cuda().weight_ih_l0)
        got = train_recurrent(layer)
    assert [str(w.message) for w in caught] == []
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_cudnn_deterministic_alone_does_not_make_torch_deterministic(gpu, settable_flags):
    x = torch.randn(1, 2, 7, 7, device="cuda", requires_grad=True)
    flags = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        F.adaptive_avg_pool2d(x, 3).sum().backward()  # cuDNN's flag: CUDA's other kernels still run as they are
        torch.use_deterministic_algorithms(True)
        assert torch.backends.cudnn.deterministic
        with pytest.raises(RuntimeError, match=r"^adaptive_avg_pool2d_backward_cuda does not have a deterministic "):
            F.adaptive_avg_pool2d(x, 3).sum().backward()
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = flags


def data_parallel_steps(device: str) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)
    parallel = torch.nn.DataParallel(model) if device == "cuda" else model
    optimizer = torch.optim.SGD(parallel.parameters(), lr=0.1)
    for batch in torch.randn(2, 12, 4):
        parallel(batch.to(device)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return [p.detach().cpu() for p in model.parameters()]


def test_data_parallel_sums_with_nccl_warning_nothing(two_gpus):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        weights = data_parallel_steps("cuda")
    assert [str(w.message) for w in caught] == []  # a CPU build says once "PyTorch is not compiled with NCCL support"
    expected = data_parallel_steps("cpu")
    for got, want in zip(weights, expected, strict=True):  # two replicas' gradients summed: float32's rounding apart
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch.cuda.nccl.version() == NCCL
    on_each = [torch.ones(3, device="cuda:0"), torch.ones(3, device="cuda:1")]
    assert torch.cuda.nccl.is_available(on_each)
    assert not torch.cuda.nccl.is_available([torch.ones(3, device="cuda"), torch.ones(3, device="cuda")])


def test_nccl_collectives_compute_what_nccl_does(two_gpus):
    a, b = torch.tensor([1.0, 5.0, 2.0, 8.0], device="cuda:0"), torch.tensor([3.0, 4.0, 6.0, 7.0], device="cuda:1")
    nccl = torch.cuda.nccl
    summed = [a.clone(), b.clone()]
    nccl.all_reduce(summed)
    assert [t.device.index for t in summed] == [0, 1] and all(t.tolist() == [4, 9, 8, 15] for t in summed)
    averaged = [a.clone(), b.clone()]
    nccl.all_reduce(averaged, op=4)  # ncclAvg
    assert all(t.tolist() == [2, 4.5, 4, 7.5] for t in averaged)
    largest = torch.empty(4, device="cuda:1")
    nccl.reduce([a, b], output=largest, root=1, op=2)  # ncclMax
    assert largest.tolist() == [3, 5, 6, 8] and a.tolist() == [1, 5, 2, 8]
    gathered = [torch.empty(8, device="cuda:0"), torch.empty(8, device="cuda:1")]
    nccl.all_gather([a, b], gathered)
    assert all(t.tolist() == [1, 5, 2, 8, 3, 4, 6, 7] for t in gathered)
    parts = [torch.empty(2, device="cuda:0"), torch.empty(2, device="cuda:1")]
    nccl.reduce_scatter([a, b], parts)
    assert parts[0].tolist() == [4, 9] and parts[1].tolist() == [8, 15]
    copies = [a.clone(), torch.zeros(4, device="cuda:1")]
    nccl.broadcast(copies, root=0)
    assert copies[1].tolist() == [1, 5, 2, 8] and copies[1].device.index == 1
    with pytest.raises(RuntimeError, match="^inputs must be on unique devices$"):
        nccl.all_reduce([a.clone(), a.clone()])
    with pytest.raises(RuntimeError, match="^all inputs must have the same number of elements$"):
        nccl.all_reduce([a.clone(), torch.ones(3, device="cuda:1")])


class _GradientOnTheHost(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.cpu()


def test_torchs_messages_name_the_gpu_as_a_gpu_does(two_gpus):
    x = torch.randn(3, 4, device="cuda", requires_grad=True)
    # torch/csrc/autograd/engine.cpp validate_outputs
    with pytest.raises(RuntimeError) as raised:
        _GradientOnTheHost.apply(x).sum().backward()
    assert str(raised.value) == ("Function _GradientOnTheHostBackward returned an invalid gradient at index 0 - "
                                 "expected device cuda:0 but got cpu")
    with pytest.raises(RuntimeError) as raised:
        torch.autograd.grad((x * 2,), (x,), (torch.ones(3, 4, device="cuda:1"),))
    assert str(raised.value) == "invalid gradient at index 0 - expected device cuda:0 but got cuda:1"
    # torch/csrc/autograd/python_variable.cpp THPVariable_set_grad
    with pytest.raises(RuntimeError) as raised:
        x.grad = torch.zeros(3, 4)
    assert str(raised.value) == ("attempting to assign a gradient with device type 'cpu' to a tensor with device type "
                                 "'cuda'. Please ensure that the gradient and the tensor are on the same device")
    # aten/src/ATen/native/PackedSequence.cpp _pack_padded_sequence
    with pytest.raises(RuntimeError) as raised:
        torch.nn.utils.rnn.pack_padded_sequence(torch.randn(3, 2, 4, device="cuda"), torch.tensor([3, 2]).cuda())
    assert str(raised.value) == ("'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor")
    # aten/src/ATen/native/transformers/attention.cpp validate_sdpa_input
    q = torch.randn(1, 2, 4, device="cuda:1")
    with pytest.raises(RuntimeError) as raised:
        F.scaled_dot_product_attention(q, q.cpu(), q.cpu())
    assert str(raised.value) == ("Expected query, key, and value to have the same device type, but got query.device: "
                                 "cuda:1 key.device: cpu and value.device: cpu instead.")
    # aten/src/ATen/native/Resize.h checkSetStorage
    with pytest.raises(RuntimeError, match=r'^Attempted to set the storage of a tensor on device "cuda:0" to a storage '
                                           r'on different device "cpu"'):
        torch.empty(0, device="cuda").set_(torch.empty(3).untyped_storage())
    x.grad = torch.ones(3, 4, device="cuda")  # and the calls that raise nothing run as they did
    (x * 2).sum().backward()
    assert x.grad.device == torch.device("cuda", 0) and torch.equal(x.grad.cpu(), torch.full((3, 4), 3.0))


def test_torchs_messages_name_the_mac_as_a_mac_does():
    with torchdevice.installed("mps-sim"):
        x = torch.randn(3, device="mps", requires_grad=True)
        with pytest.raises(RuntimeError, match=r"^Function _GradientOnTheHostBackward returned an invalid gradient at "
                                               r"index 0 - expected device mps:0 but got cpu$"):
            _GradientOnTheHost.apply(x).sum().backward()
