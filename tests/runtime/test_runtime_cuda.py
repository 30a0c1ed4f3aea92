"""The torch.cuda namespace on the CPU target: what programs see, and what torch's own code sees."""

from __future__ import annotations

import contextlib
import functools
import time

import pytest
import torch
from torch.cuda.amp import common  # torch's own code, where the original is left
from torchdevice_generated.truth_table import TOLD_THE_TRUTH

import torchdevice


def test_programs_see_one_cuda_device_torch_internals_see_none(on_cpu):
    assert torch.cuda.is_available() and torch.cuda.is_initialized()
    assert torch.cuda.device_count() == 1 and torch.cuda.current_device() == 0
    assert common.amp_definitely_not_available()  # it asks torch.cuda.is_available()
    x = torch.ones(2, device="cuda")
    assert x.is_cuda
    assert not torch._C.TensorBase.is_cuda.__get__(x)  # what torch's C++ and Python internals see


@contextlib.contextmanager
def _nothing():
    yield


def _caller(module: str, ask):  # type: ignore[no-untyped-def]
    """A function of module ``module`` that calls ``ask``."""
    namespace = {"__name__": module, "ask": ask}
    exec("def caller():\n    return ask(), torch.ones(1, device='cuda').is_cuda\n", {**namespace, "torch": torch},
         namespace)
    return namespace["caller"]


@pytest.mark.parametrize("between", [lambda f: f, functools.partial, lambda f: _nothing()(f),
                                     lambda f: functools.wraps(f)(functools.partial(f))],
                         ids=["nothing", "partial", "decorator", "wrapped partial"])
def test_who_asks_is_the_code_past_what_passes_the_call_on(on_cpu, between):
    """A decorator or a ``functools.partial`` between the asking code and the answer does not change the answer:
    the program is told CUDA is there, torch's own code and the packages told the truth that it is not."""
    ask = between(torch.cuda.is_available)
    assert _caller("train", ask)() == (True, True)
    assert _caller("torch.utils.something", ask)() == (False, False)
    assert _caller(next(iter(TOLD_THE_TRUTH)) + ".backend", ask)() == (False, False)


def test_device_selection(on_cpu):
    torch.cuda.set_device(0)
    torch.cuda.set_device("cuda:0")
    with torch.cuda.device(0):
        assert torch.zeros(1, device="cuda").device.type == "cpu"
    with torch.cuda.device_of(torch.ones(1)):
        pass
    with pytest.raises(ValueError, match="Expected a cuda device"):
        torch.cuda.set_device("meta")


def test_device_description(on_cpu):
    properties = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info()
    assert properties.name == torch.cuda.get_device_name() and "CPU" in properties.name
    assert (properties.major, properties.minor) == torch.cuda.get_device_capability()
    assert properties.total_memory == total >= free > 0
    assert torch.cuda.is_bf16_supported()


def test_events_time_what_ran_between_records(on_cpu):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert start.query() and 20 <= start.elapsed_time(end) < 2000
    with pytest.raises(ValueError, match="enable_timing=True"):
        torch.cuda.Event().elapsed_time(end)
    with pytest.raises(ValueError, match="recorded"):
        torch.cuda.Event(enable_timing=True).elapsed_time(end)


def test_streams(on_cpu):
    side = torch.cuda.Stream()
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    with torch.cuda.stream(side):
        assert torch.cuda.current_stream() is side
        event = side.record_event()
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.current_stream().wait_event(event)
    assert side.query() and event.query()
    torch.cuda.synchronize()


@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
def test_a_tensor_used_on_a_side_stream_records_it_and_a_stream_is_a_context(target):
    # a prefetcher's lines (and FSDP's): work on a side stream, the tensor recorded on the stream that uses it next
    with torchdevice.installed(target):
        side, x = torch.cuda.Stream(), torch.arange(4.0, device="cuda")
        with side:
            assert torch.cuda.current_stream() is side
            y = x * 2
        assert torch.cuda.current_stream() is torch.cuda.default_stream()
        torch.cuda.current_stream().wait_stream(side)
        assert y.record_stream(torch.cuda.current_stream()) is None and x.record_stream(side) is None
        assert y.tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError):  # torch's own, once uninstalled
        y.record_stream(side)


def test_cuda_rng_is_the_generator_cuda_tensors_draw_from(on_cpu):
    torch.cuda.manual_seed(3)
    first = torch.randn(4, device="cuda")
    torch.cuda.manual_seed_all(3)
    assert torch.randn(4, device="cuda").equal(first)
    state = torch.cuda.get_rng_state()
    drawn = torch.rand(2, device="cuda")
    torch.cuda.set_rng_state(state)
    assert torch.rand(2, device="cuda").equal(drawn)
    assert torch.cuda.initial_seed() == 3
    torch.cuda.set_rng_state_all([state])
    with torch.random.fork_rng(device_type="cuda"):
        torch.randn(8, device="cuda")
    assert torch.rand(2, device="cuda").equal(drawn)  # fork_rng restored the CUDA (here: CPU) generator


def test_memory_statistics_on_cpu(on_cpu):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.memory_allocated() == torch.cuda.max_memory_reserved() == 0
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["peak"] == 0
    assert "allocated_bytes.all.current" in torch.cuda.memory_summary()
    torch.cuda.set_per_process_memory_fraction(0.5)
    assert torch.cuda.get_per_process_memory_fraction() == 0.5


def test_a_memory_fraction_ends_with_its_installation(on_cpu):
    torch.cuda.set_per_process_memory_fraction(0.25)
    torchdevice.uninstall()
    torchdevice.install("cpu")
    assert torch.cuda.get_per_process_memory_fraction() == 1.0  # the default, as in a fresh process


FLAGS_PROGRAM = """
import torch, torchdevice
torchdevice.install("cpu")
torch.cuda.nvtx.range_push("step")
torch.cuda.nvtx.range_pop()
with torch.cuda.nvtx.range("block"):
    pass
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
torch.backends.cuda.enable_flash_sdp(True)
assert torch.backends.cuda.preferred_linalg_library("cusolver") is not None
x = torch.randn(4, 4, device="cuda")
print(torch.backends.cudnn.deterministic, torch.backends.cuda.matmul.allow_tf32, (x @ x).device)
"""


@pytest.mark.processes
def test_markers_and_flags_are_harmless(python):
    # A fresh interpreter: the flags are process-wide (and torch's test utilities freeze them).
    done = python("-c", FLAGS_PROGRAM)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "cpu"]


def test_what_cannot_be_emulated_says_so(on_cpu):
    with pytest.raises(NotImplementedError, match=r"torch\.cuda\.ExternalStream is not supported on target 'cpu'.*raw"):
        torch.cuda.ExternalStream(0)
    with pytest.raises(NotImplementedError, match=r"torch\.cuda\.current_blas_handle .*'cpu'"):
        torch.cuda.current_blas_handle()
    assert not isinstance(object(), torch.cuda.ExternalStream)  # unsupported classes are still classes


def test_a_cuda_graph_replays_its_region_on_the_cpu_target(on_cpu):
    static = torch.zeros(3, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = (static + 1) * 2
    assert out.tolist() == [2.0, 2.0, 2.0]  # what the capture computed (a GPU's is unwritten until a replay)
    static.copy_(torch.tensor([1.0, 2.0, 3.0]))
    graph.replay()
    assert out.tolist() == [4.0, 6.0, 8.0]


@pytest.mark.parametrize(("module", "probe"), [(m, p) for m, probes in TOLD_THE_TRUTH.items() for p in probes])
def test_packages_told_the_truth_are_answered_as_torch_is(on_cpu, module, probe):
    """bitsandbytes and DeepSpeed choose a backend by asking CUDA: their code (the package and its submodules) gets
    the answers torch's own code gets, the program CUDA's."""

    def asked_from(name: str):
        return eval(f"{probe}()", {"__name__": name, "torch": torch})

    program = asked_from("__main__")
    assert program == asked_from("transformers.utils")  # other libraries are told what the program is
    assert asked_from(module) == asked_from(f"{module}.backends.cuda") == asked_from("torch.utils") != program
