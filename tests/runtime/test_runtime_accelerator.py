"""Integer ordinals and ``torch.accelerator`` answer as on a CUDA machine, in agreement with the emulated
``torch.cuda``; torch's compilers and torch's own uses of the accelerator keep working."""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch

import torchdevice


@pytest.fixture
def two_devices():
    device = torchdevice.install("cpu", devices=2)
    yield device
    torchdevice.uninstall()


def test_an_integer_ordinal_names_a_cuda_device(two_devices):
    assert torch.device(0) == torch.device("cuda", 0) and torch.device(1) == torch.device("cuda:1")
    assert type(torch.device(0)) is torch._C.device and isinstance(torch.device(0), torch.device)
    assert pickle.loads(pickle.dumps(torch.device(1))) == torch.device("cuda", 1)
    assert torch.zeros(2, device=torch.device(1)).device == two_devices
    assert torch.nn.Linear(2, 2).to(torch.device(0)).weight.device == two_devices
    with pytest.raises(RuntimeError, match="must not be negative"):  # CUDA's torch says the same
        torch.device(-1)
    assert torch.device("cpu", 0) == torch.device(type="cpu", index=0)  # other forms as they were
    torchdevice.uninstall()
    if torch._C._get_accelerator().type == "cpu":  # (a simulated Mac that ran in this process is one, for torch)
        with pytest.raises(RuntimeError, match="accelerator"):  # torch's own answer without an accelerator
            torch.device(0)


def test_the_accelerator_is_the_emulated_cuda(two_devices):
    accelerator = torch.accelerator
    assert accelerator.is_available() and torch.cuda.is_available()
    assert accelerator.current_accelerator() == accelerator.current_accelerator(check_available=True)
    assert accelerator.current_accelerator() == torch.device("cuda")
    assert accelerator.device_count() == torch.cuda.device_count() == 2
    assert accelerator.current_device_index() == torch.cuda.current_device() == 0
    accelerator.set_device_index(1)
    assert torch.cuda.current_device() == 1
    with accelerator.device_index(0):
        assert (accelerator.current_device_index(), torch.cuda.current_device()) == (0, 0)
    assert accelerator.current_device_index() == 1
    torch.cuda.set_device(0)
    assert accelerator.current_device_index() == 0
    accelerator.synchronize()
    accelerator.synchronize(1)
    with pytest.raises(torch.AcceleratorError, match="invalid device ordinal"):
        accelerator.synchronize(2)
    assert accelerator.memory_allocated() == torch.cuda.memory_allocated()
    assert accelerator.get_memory_info()[1] == torch.cuda.mem_get_info()[1] > 0
    assert set(accelerator.memory_stats()) == set(torch.cuda.memory_stats())
    assert torch.get_device_module(accelerator.current_accelerator()) is torch.cuda


def test_deprecated_names_warn_at_the_callers_line_and_agree(two_devices):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.accelerator.set_device_idx(1)
        index = torch.accelerator.current_device_idx()
    assert index == torch.cuda.current_device() == 1
    assert [(w.category, str(w.message), w.filename) for w in caught] == [
        (FutureWarning, "Use `set_device_index` instead.", __file__),
        (FutureWarning, "Use `current_device_index` instead.", __file__),
    ]


def test_capability_lists_the_dtypes_the_target_holds(two_devices):
    dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.float64} <= dtypes
    for dtype in dtypes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.empty(1, dtype=dtype, device="cuda").dtype == dtype


def test_torch_code_that_asks_for_the_accelerator_still_runs_on_the_cpu(two_devices):
    """Torch's own callers are told the truth (no accelerator), so pinning and the device module stay the CPU's."""
    data = torch.arange(8.0)
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    assert torch.cat(list(loader)).equal(data)
    with torch.autocast(torch.accelerator.current_accelerator().type):
        assert torch.mm(torch.ones(2, 2, device=0), torch.ones(2, 2, device=0)).dtype != torch.float32


def step(x: torch.Tensor) -> tuple[torch.Tensor, torch.device, torch.device]:
    by_name, by_ordinal = torch.device("cuda"), torch.device(0)
    return (x.to(by_name) + torch.ones(2, device=by_ordinal)) * 2, by_name, by_ordinal


@pytest.mark.processes
def test_compile_fullgraph_builds_devices_by_name_and_ordinal(two_devices):
    import torch._dynamo

    x = torch.arange(2.0)
    expected = step(x)
    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        got = torch.compile(step, fullgraph=True, backend=backend)(x)
        assert got[1:] == expected[1:] == (torch.device("cuda"), torch.device("cuda", 0))
        torch.testing.assert_close(got[0], expected[0])

    def take(x: torch.Tensor, device: torch.device) -> torch.Tensor:
        return torch.zeros(2, device=device) + x

    compiled = torch.compile(take, fullgraph=True, backend="eager")
    for device in (torch.device(1), torch.device("cpu")):
        assert compiled(x, device).equal(x)
    torch._dynamo.reset()


LATE_DYNAMO = """
import torch, torchdevice
torchdevice.install("cpu")
import torch._dynamo  # its type tables are built now, holding the stand-in for torch.device
def step(x):
    return x.to(torch.device(0)) + 1, torch.device("cuda")
out, device = torch.compile(step, fullgraph=True, backend="eager")(torch.zeros(2))
print(out.tolist(), device)
"""


@pytest.mark.processes
def test_compile_after_dynamo_is_first_imported_under_the_runtime(python):
    result = python("-c", LATE_DYNAMO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "[1.0, 1.0] cuda"


def test_torchscript_compiles_torch_device(two_devices):
    def move(x: torch.Tensor, device: torch.device) -> torch.Tensor:
        return x.to(device) + 1

    def build(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.device("cpu")) + 1

    x = torch.zeros(2)
    assert torch.jit.script(move)(x, torch.device("cpu")).equal(x + 1)
    scripted = torch.jit.script(build)
    assert "aten::to" in str(scripted.graph) and scripted(x).equal(x + 1)


def test_transformers_device_map_with_an_integer_ordinal(two_devices, tmp_path):
    """``from_pretrained(device_map={"": 0})`` resolves the ordinal with ``torch.device(0)``."""
    pytest.importorskip("accelerate", reason="transformers needs accelerate for device_map")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=32, n_positions=16)
    saved = transformers.GPT2LMHeadModel(config)
    saved.save_pretrained(tmp_path)
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, device_map={"": 0})
    assert loaded.device == two_devices
    for (name, expected), got in zip(saved.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert got.equal(expected), name
