"""The cuda-sim target: a simulated NVIDIA GPU that tells a CUDA program where its tensors are, places them as CUDA
checks them (with one and two devices), counts memory as CUDA's caching allocator does and holds it to the card's,
and computes what the CPU computes. Lines written the way programs write them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torchdevice
from torchdevice.device import gpus

SAME_DEVICE = "Expected all tensors to be on the same device, but"


@pytest.fixture
def gpu():
    with torchdevice.installed("cuda-sim") as device:
        yield device


@pytest.fixture
def two_gpus():
    with torchdevice.installed("cuda-sim", devices=2) as device:
        yield device


def test_tensors_models_and_storages_say_cuda(gpu, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).cuda()
    x = torch.randn(3, 4, device="cuda")
    out = model(x)
    assert gpu == torch.device("cuda", 0) == torchdevice.target()
    assert next(model.parameters()).device.type == "cuda" and out.is_cuda and (x * 2).get_device() == 0
    assert "device='cuda:0'" in repr(out) and x.untyped_storage().device == torch.device("cuda", 0)
    assert not x.is_mps and not torch.ones(2).is_cuda
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    assert all(t.is_cuda for t in torch.load(path).values())  # restored on the device, as a GPU restores it
    assert all(t.device.type == "cpu" for t in torch.load(path, map_location="cpu").values())
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy"):
        out.numpy()
    assert out.detach().cpu().numpy().shape == (3, 2)


def test_the_lines_a_gpu_refuses_raise_and_those_it_runs_run(gpu):
    """(Their words: ``test_cuda_words.py``.)"""
    model = torch.nn.Linear(4, 2).cuda()
    x, host = torch.randn(5, 4, device="cuda"), torch.randn(5, 4)
    refused = {
        "stack": lambda: torch.stack([host, x]),
        "cpu batch": lambda: model(host),
        "cpu target": lambda: F.mse_loss(model(x), torch.zeros(5, 2)),
        "cpu indices into an embedding": lambda: torch.nn.Embedding(10, 3).cuda()(torch.tensor([1, 2])),
        "cpu condition": lambda: torch.where(host > 0, x, 0.0),
        "in place": lambda: x.add_(host),
        "cat": lambda: torch.cat([x, host]),
        "matmul": lambda: x @ torch.randn(4, 3),
    }
    for line, run in refused.items():
        with pytest.raises(RuntimeError, match=SAME_DEVICE):
            run()
            pytest.fail(line)
    with pytest.raises(NotImplementedError, match=r"^Could not run 'aten::histogram.bin_ct' with arguments from the "
                       r"'CUDA' backend"):
        torch.histogram(x, bins=4)  # CUDA has no kernel for it (torch.histc it has)
    assert torch.histc(x, bins=4).is_cuda
    assert (x * torch.tensor(2.0)).is_cuda  # a 0-dim host tensor is a scalar
    assert x[torch.tensor([0, 3])].is_cuda  # host indices
    assert model(x).is_cuda and x.cpu().numpy().shape == (5, 4)


def test_two_gpus_are_two_devices(two_gpus):
    a, b = torch.ones(3, device="cuda:0"), torch.ones(3, device="cuda:1")
    assert (a.device, b.device, (b * 2).device, b.get_device()) == (
        torch.device("cuda", 0), torch.device("cuda", 1), torch.device("cuda", 1), 1)
    with pytest.raises(RuntimeError, match=f"{SAME_DEVICE} found at least two devices, cuda:0 and cuda:1!"):
        a + b
    # TensorAdvancedIndexing.cpp: indices on the host or on the indexed tensor's device; an index_put_ moves them
    with pytest.raises(RuntimeError, match=r"^indices should be either on cpu or on the same device as the indexed "
                       r"tensor \(cuda:0\)$"):
        a[torch.tensor([0, 2], device="cuda:1")]
    with pytest.raises(RuntimeError, match=r"the same device as the indexed tensor \(cpu\)$"):
        torch.arange(3.0)[torch.tensor([1], device="cuda:1")]
    assert a[torch.tensor([0, 2])].tolist() == a[torch.tensor([0, 2], device="cuda:0")].tolist() == [1.0, 1.0]
    a[torch.tensor([1], device="cuda:1")] = 5.0
    assert a.tolist() == [1.0, 5.0, 1.0]
    a[1] = 1.0
    moved = a.to("cuda:1")
    assert moved.device.index == 1 and torch.equal(moved.cpu(), b.cpu()) and moved.data_ptr() != a.data_ptr()
    with torch.cuda.device(1):
        assert torch.zeros(2, device="cuda").device == torch.device("cuda", 1)
    torch.cuda.set_device(1)
    try:
        assert torch.cuda.current_device() == 1 and torch.empty(1, device="cuda").get_device() == 1
    finally:
        torch.cuda.set_device(0)
    model = torch.nn.Linear(3, 1).to("cuda:1")
    model(b).sum().backward()
    assert model.weight.grad.device == torch.device("cuda", 1)
    with pytest.raises(torch.AcceleratorError, match="invalid device ordinal"):
        torch.ones(1, device="cuda:2")


@pytest.mark.parametrize("devices", [1, 2, 3])
def test_data_parallel_splits_the_batch_over_the_gpus_and_trains_as_the_cpu(devices):
    def train(device: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)
        parallel = torch.nn.DataParallel(model) if device == "cuda" else model
        optimizer = torch.optim.SGD(parallel.parameters(), lr=0.1)
        x, outputs = torch.randn(3, 12, 4), []
        for batch in x:
            out = parallel(batch.to(device))
            assert out.device == torch.device(device, 0) if device == "cuda" else out.device.type == "cpu"
            out.square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            outputs.append(out.detach().cpu())
        return outputs, [p.detach().cpu() for p in model.parameters()]

    expected_outputs, expected_weights = train("cpu")
    with torchdevice.installed("cuda-sim", devices=devices):
        assert torch.cuda.device_count() == devices
        outputs, weights = train("cuda")
        replicas = torch.nn.parallel.replicate(torch.nn.Linear(2, 2).cuda(), list(range(devices)))
        assert [r.weight.device.index for r in replicas] == list(range(devices))
        chunks = torch.nn.parallel.scatter(torch.arange(6.0, device="cuda").view(6, 1), list(range(devices)))
        assert [c.device.index for c in chunks] == list(range(devices))
        gathered = torch.nn.parallel.gather(chunks, 0)
        assert gathered.device == torch.device("cuda", 0) and gathered.flatten().tolist() == list(range(6))
    # the replicas' gradients are summed in another order than one CPU model's: float32's rounding apart
    for got, want in zip([*outputs, *weights], [*expected_outputs, *expected_weights], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_memory_counts_as_cudas_caching_allocator():
    with torchdevice.installed("cuda-sim", gpu_memory="64MiB"):
        before = torch.cuda.memory_allocated()
        x = torch.empty(1000, device="cuda")  # 4000 bytes: one 512-byte-rounded block
        assert torch.cuda.memory_allocated() - before == 4096
        assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()
        assert torch.cuda.memory_reserved() % (2 << 20) == 0 and torch.cuda.memory_reserved() >= 4096
        assert torch.cuda.memory_stats()["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
        assert torch.cuda.mem_get_info()[1] == 64 << 20 == torch.cuda.get_device_properties(0).total_memory
        del x
        assert torch.cuda.memory_allocated() == before
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == before
        with pytest.raises(torch.cuda.OutOfMemoryError, match=r"^CUDA out of memory. Tried to allocate 128.00 MiB. "
                           r"GPU 0 has a total capacity of 64.00 MiB"):
            torch.empty(32 << 20, device="cuda")
        assert torch.cuda.memory_allocated() == before  # nothing kept of what could not be had


def test_a_batch_size_finder_halves_until_the_batch_fits_the_card():
    """What accelerate's find_executable_batch_size does: try, catch CUDA's out-of-memory error, halve."""
    with torchdevice.installed("cuda-sim", gpu_memory="32MiB"):  # the 4 MiB weight takes a 20 MiB segment
        model = torch.nn.Linear(1024, 1024).cuda()
        tried = []
        batch = 4096
        while True:
            tried.append(batch)
            try:
                model(torch.randn(batch, 1024, device="cuda")).sum().backward()
                break
            except torch.cuda.OutOfMemoryError:
                batch //= 2
        assert tried[0] == 4096 and 1 < len(tried) and tried[-1] * 1024 * 4 < 32 << 20


@pytest.mark.parametrize("card", ["A100-40GB", "T4"])
def test_the_card_is_what_the_program_reads(card):
    chosen = gpus.CARDS[card]
    with torchdevice.installed("cuda-sim", gpu=card):
        properties = torch.cuda.get_device_properties(0)
        assert torch.cuda.get_device_name() == properties.name == chosen.name
        assert torch.cuda.get_device_capability() == chosen.capability == (properties.major, properties.minor)
        assert properties.total_memory == chosen.memory and properties.multi_processor_count == chosen.multiprocessors
        assert torch.cuda.is_bf16_supported(including_emulation=False) is (chosen.capability >= (8, 0))


def test_training_computes_what_the_cpu_computes():
    def losses() -> list[float]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                    torch.nn.Linear(16, 1)).to("cuda")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        data = torch.randn(64, 8).to("cuda")
        target = data.sum(1, keepdim=True)
        seen = []
        for _ in range(5):
            optimizer.zero_grad()
            loss = F.mse_loss(model(data), target)
            loss.backward()
            optimizer.step()
            seen.append(loss.item())
        return seen

    with torchdevice.installed("cpu"):
        native = losses()
    with torchdevice.installed("cuda-sim"):
        simulated = losses()
    assert simulated == pytest.approx(native, rel=1e-5)


def test_the_simulated_mac_after_a_gpu_is_a_mac_again():
    with torchdevice.installed("cuda-sim", gpu_memory="8MiB"):
        assert torch.ones(1, device="cuda").is_cuda
    with torchdevice.installed("mps-sim"):
        x = torch.empty(4 << 20, device="cuda")  # past the GPU's 8 MiB: a Mac's memory is the host's
        assert x.device == torch.device("mps", 0) and x.is_mps


@pytest.mark.processes
def test_run_takes_a_card_or_its_memory_and_refuses_a_bad_one(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n"
                      "x = torch.ones(4, device='cuda')\n"
                      "print(x.device, torch.cuda.get_device_name(), torch.cuda.mem_get_info()[1])\n")
    env = {**os.environ, "TORCHDEVICE_TARGET": ""}
    done = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--target", "cuda-sim", "--gpu-memory", "1GiB",
                           str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cuda:0", "Tesla", "T4", str(1 << 30)]
    bad = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--target", "cuda-sim", "--gpu", "K80",
                          str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("torchdevice run: unknown GPU 'K80'")
    assert "Traceback" not in bad.stderr


def test_sizes_are_read_as_people_write_them():
    assert [gpus.parse_size(s) for s in ("1GiB", "512MiB", "16GB", "1.5GiB", 4096)] == [
        1 << 30, 512 << 20, 16 * 10**9, 3 << 29, 4096]
    for bad in ("lots", "0GB", "-1GiB"):
        with pytest.raises(ValueError, match="GPU memory"):
            gpus.parse_size(bad)


def test_deterministic_algorithms_refuse_what_cudas_kernels_alert_on(gpu):
    pool = torch.nn.AdaptiveAvgPool2d(3)
    x = torch.randn(2, 4, 7, 7, device="cuda", requires_grad=True)
    pool(x).sum().backward()  # runs while determinism is not asked for
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="^adaptive_avg_pool2d_backward_cuda does not have a deterministic"):
            pool(x).sum().backward()
        torch.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="adaptive_avg_pool2d_backward_cuda does not have a deterministic"):
            pool(x).sum().backward()
        assert torch.nn.functional.linear(x.flatten(1), torch.ones(3, 196, device="cuda")).is_cuda  # no alert
    finally:
        torch.use_deterministic_algorithms(False)
    with torchdevice.installed("cpu"):  # the CPU's kernel has no alert: what cuda-sim exists to show
        torch.use_deterministic_algorithms(True)
        try:
            pool(torch.randn(2, 4, 7, 7, requires_grad=True)).sum().backward()
        finally:
            torch.use_deterministic_algorithms(False)


def test_autocast_for_cuda_casts_as_cuda_does(gpu):
    model = torch.nn.Linear(4, 3).cuda()
    x = torch.randn(2, 4, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        y = model(x)
        probabilities = torch.softmax(y, -1)  # CUDA's policy runs softmax in float32
    assert (y.dtype, y.device, probabilities.dtype) == (torch.float16, torch.device("cuda", 0), torch.float32)
    scaler = torch.amp.GradScaler("cuda")
    scaler.scale(y.float().sum()).backward()
    assert scaler.get_scale() == 65536.0 and model.weight.grad.is_cuda


def test_a_captured_training_step_replays_as_eager_steps(gpu):
    """A CUDA graph of a whole step, as PyTorch's documentation writes it: the capture steps nothing, each replay one
    step on the static tensors."""
    torch.manual_seed(0)
    captured, eager = torch.nn.Linear(4, 2).cuda(), torch.nn.Linear(4, 2).cuda()
    eager.load_state_dict(captured.state_dict())
    x, y = torch.randn(8, 4, device="cuda"), torch.randn(8, 2, device="cuda")
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (captured, eager)]

    def step(model, optimizer, data):
        loss = F.mse_loss(model(data), y)
        loss.backward()
        optimizer.step()
        return loss

    for model, optimizer in zip((captured, eager), optimizers, strict=True):  # warm-up, as before a capture
        step(model, optimizer, x)
    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    optimizers[0].zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        assert torch.cuda.is_current_stream_capturing()
        static_loss = step(captured, optimizers[0], static_x)
    assert not torch.cuda.is_current_stream_capturing()
    assert torch.equal(captured.weight.cpu(), eager.weight.cpu())  # the capture launched nothing
    for _ in range(3):
        batch = torch.randn(8, 4, device="cuda")
        static_x.copy_(batch)
        optimizers[0].zero_grad(set_to_none=False)
        graph.replay()
        optimizers[1].zero_grad()
        loss = step(eager, optimizers[1], batch)
        assert static_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    torch.testing.assert_close(captured.weight.cpu(), eager.weight.cpu())
    with pytest.raises(torch.AcceleratorError, match="operation not permitted when stream is capturing"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            captured(static_x).sum().item()  # a GPU cannot read a value back while capturing


def test_a_gpu_after_the_simulated_mac_counts_its_memory_as_cuda_does():
    with torchdevice.installed("mps-sim"):
        kept = torch.empty(1000, device="cuda")  # 4,000 bytes, counted byte for byte on a Mac
    with torchdevice.installed("cuda-sim"):
        before = torch.cuda.memory_allocated()
        assert torch.cuda.max_memory_allocated() == before  # a new installation's peaks start from what is live
        made = torch.empty(1000, device="cuda")
        assert torch.cuda.memory_allocated() - before == 4096  # CUDA's 512-byte blocks, not the Mac's 4,000 bytes
        assert torch.cuda.memory_reserved() % (2 << 20) == 0 and torch.cuda.memory_reserved() > 0
        del made
    del kept


def test_products_into_another_dtype_run_as_cuda_runs_them(gpu):
    """``out_dtype=`` (trl's log-probabilities in half precision): CUDA's kernels, which the CPU lacks."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 8, dtype=torch.float16), torch.randn(8, 3, dtype=torch.float16)
    bias = torch.randn(4, 3)
    product = torch.mm(a.cuda(), b.cuda(), out_dtype=torch.float32)
    added = torch.addmm(bias.cuda(), a.cuda(), b.cuda(), out_dtype=torch.float32, beta=0.5)
    batched = torch.bmm(a[None].cuda(), b[None].cuda(), out_dtype=torch.float32)
    assert (product.dtype, product.device, batched.shape) == (torch.float32, torch.device("cuda", 0), (1, 4, 3))
    torch.testing.assert_close(product.cpu(), a.float() @ b.float())
    torch.testing.assert_close(added.cpu(), 0.5 * bias + a.float() @ b.float())
    out = torch.empty(0, device="cuda")
    assert torch.mm(a.cuda(), b.cuda(), out_dtype=torch.float32, out=out) is out and out.shape == (4, 3)
    with pytest.raises(RuntimeError, match="^out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs"):
        torch.mm(a.float().cuda(), b.float().cuda(), out_dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="'aten::mm.dtype' with arguments from the 'CPU' backend"):
        torch.mm(a, b, out_dtype=torch.float32)  # host tensors: the CPU has no such kernel, here as on a GPU machine


def test_sync_batch_norms_kernels_compute_what_cudas_compute(gpu):
    """``batch_norm_stats`` and kin (``nn.SyncBatchNorm``'s), which the CPU lacks: two ranks' shares of a batch, of
    unequal sizes, in half precision, give the whole batch's statistics in float32, as CUDA's kernels do."""
    torch.manual_seed(0)
    x = torch.randn(7, 3, 5, dtype=torch.float16)
    whole = x.double().transpose(0, 1).reshape(3, -1)
    shares = [torch.batch_norm_stats(t.cuda(), 1e-5) for t in (x[:5], x[5:])]
    assert [(s.dtype, s.device) for s in shares[0]] == [(torch.float32, torch.device("cuda", 0))] * 2
    running_mean, running_var = torch.zeros(3, device="cuda"), torch.ones(3, device="cuda")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        x.cuda(), torch.stack([s[0] for s in shares]), torch.stack([s[1] for s in shares]), running_mean, running_var,
        0.1, 1e-5, torch.tensor([25.0, 10.0], device="cuda"))
    torch.testing.assert_close(mean.cpu(), whole.mean(1).float())
    torch.testing.assert_close(invstd.cpu(), (whole.var(1, correction=0) + 1e-5).rsqrt().float())
    torch.testing.assert_close(running_mean.cpu(), 0.1 * whole.mean(1).float())  # updated in place
    torch.testing.assert_close(running_var.cpu(), (0.9 + 0.1 * whole.var(1)).float())  # the unbiased variance
    out = torch.batch_norm_elemt(x.cuda(), None, None, mean, invstd, 1e-5)
    assert out.dtype == torch.float16
    normalized = (x.double() - whole.mean(1)[:, None]) * invstd.cpu().double()[:, None]
    torch.testing.assert_close(out.cpu(), normalized.half())
    assert torch.batch_norm_stats(torch.ones(2, 1, device="cuda"), 0)[1].tolist() == [0.0]  # CUDA's, not inf
    with pytest.raises(RuntimeError, match="^\"batch_norm_stats_cuda\" not implemented for 'Long'$"):
        torch.batch_norm_stats(torch.ones(2, 3, dtype=torch.long, device="cuda"), 1e-5)
    with pytest.raises(RuntimeError, match="^batch_norm_gather_stats_with_counts: expected mean to be 2-dimensional"):
        torch.batch_norm_gather_stats_with_counts(x.cuda(), mean, invstd, None, None, 0.1, 1e-5, mean)
    with pytest.raises(NotImplementedError, match="'aten::batch_norm_stats' with arguments from the 'CPU' backend"):
        torch.batch_norm_stats(x.float(), 1e-5)  # host tensors: the CPU has no such kernel, here as on a GPU machine


def test_checkpointed_layers_recompute_in_cudas_autocast(gpu):
    """torch.utils.checkpoint reopens the region's autocast for the device torch knows: still CUDA's policy."""
    layer = torch.nn.Linear(8, 8).cuda()
    x = torch.randn(4, 8, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
    y.float().sum().backward()  # the recomputed forward casts as the first did
    assert y.dtype == torch.bfloat16 and layer.weight.grad.dtype == torch.float32 and x.grad.is_cuda


def _autocast_forward(compiled: bool) -> torch.Tensor:
    """accelerate's mixed precision: a forward wrapped in ``torch.autocast("cuda")``, compiled, breaking its graph
    inside the region (a print would), where Dynamo enters the region again in a frame of its own."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).cuda()

    def forward(x: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return model(x)

    forward = torch.autocast("cuda", dtype=torch.float16)(forward)
    return (torch.compile(forward, backend="eager") if compiled else forward)(torch.randn(2, 4, device="cuda"))


def test_a_compiled_forward_in_cudas_autocast_gives_the_eager_values():
    with torchdevice.installed("cpu"):
        expected = _autocast_forward(compiled=False)
    try:
        with torchdevice.installed("cpu"):
            on_cpu = _autocast_forward(compiled=True)
        with torchdevice.installed("cuda-sim"):
            on_gpu = _autocast_forward(compiled=True)
            assert (on_gpu.dtype, on_gpu.device) == (torch.float16, torch.device("cuda", 0))
            on_gpu = on_gpu.cpu()
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(on_cpu, expected)
    torch.testing.assert_close(on_gpu, expected)
