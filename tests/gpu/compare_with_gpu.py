"""The same lines on a real NVIDIA GPU and under ``--target cuda-sim``: what each says and raises, side by side.

``python tests/gpu/compare_with_gpu.py`` on a machine with CUDA runs every probe natively (torch's CUDA, torchdevice
not installed) and under ``torchdevice run --target cuda-sim --gpu-memory <the GPU's memory>``, each in a fresh
process, and prints one JSON line per probe whose answers differ, then a summary; it exits 1 when any differs.
``--sim-only`` runs the simulated side alone (on any machine: the suite checks that every probe runs there).

The probes are the lines of identity, placement, the allocator's counts, determinism alerts, refused kernels,
``SyncBatchNorm``'s kernels (CUDA's only), cuDNN and torch's messages that the cuda-sim page
(docs/targets/cuda-sim.md) claims are as on a GPU. A probe's answer is its value (``repr``), or the exception's type
and first line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PROBES: dict[str, str] = {
    "device": "torch.ones(2, device='cuda').device",
    "is_cuda": "(torch.ones(2, device='cuda') * 2).is_cuda",
    "get_device": "torch.ones(2, device='cuda').get_device()",
    "repr": "repr(torch.ones(2, device='cuda'))",
    "storage device": "torch.ones(2, device='cuda').untyped_storage().device",
    "parameter device": "next(torch.nn.Linear(2, 2).cuda().parameters()).device",
    "numpy": "torch.ones(2, device='cuda').numpy()",
    "stack with cpu": "torch.stack([torch.ones(2), torch.ones(2, device='cuda')])",
    "cpu batch": "torch.nn.Linear(2, 2).cuda()(torch.ones(3, 2))",
    "cpu target": "torch.nn.functional.mse_loss(torch.ones(3, device='cuda'), torch.ones(3))",
    "cpu indices": "torch.nn.Embedding(5, 2).cuda()(torch.tensor([1, 2]))",
    "cpu condition": "torch.where(torch.ones(3) > 0, torch.ones(3, device='cuda'), 0.0)",
    "in place from cpu": "torch.ones(3, device='cuda').add_(torch.ones(3))",
    "cat": "torch.cat([torch.ones(3, device='cuda'), torch.ones(3)])",
    "matmul": "torch.ones(2, 2, device='cuda') @ torch.ones(2, 2)",
    "cpu scalar": "(torch.ones(3, device='cuda') * torch.tensor(2.0)).device",
    "cpu index": "torch.arange(4.0, device='cuda')[torch.tensor([0, 2])].tolist()",
    "allocated 1000 floats": "(lambda b: (lambda x: torch.cuda.memory_allocated() - b)"
                             "(torch.empty(1000, device='cuda')))(torch.cuda.memory_allocated())",
    "allocated 1 byte": "(lambda b: (lambda x: torch.cuda.memory_allocated() - b)"
                        "(torch.empty(1, dtype=torch.uint8, device='cuda')))(torch.cuda.memory_allocated())",
    "out of memory": "torch.empty(2**40, device='cuda')",
    "reserved by 10, 300000 and 30000000 floats": "(torch.cuda.empty_cache(), (lambda r: (lambda kept: "
                                                  "torch.cuda.memory_reserved() - r)([torch.empty(n, device='cuda') "
                                                  "for n in (10, 300_000, 30_000_000)]))"
                                                  "(torch.cuda.memory_reserved()))",
    "memory_stats keys": "sorted(torch.cuda.memory_stats())",
    "invalid ordinal": "torch.ones(1, device=f'cuda:{torch.cuda.device_count()}')",
    "histogram (no CUDA kernel)": "torch.histogram(torch.ones(4, device='cuda'), bins=2)",
    "deterministic pooling backward": "(torch.use_deterministic_algorithms(True), torch.nn.AdaptiveAvgPool2d(3)"
                                      "(torch.ones(1, 1, 7, 7, device='cuda', requires_grad=True)).sum().backward())",
    "deterministic index_add_": "(torch.use_deterministic_algorithms(True), torch.zeros(3, device='cuda')"
                                ".index_add_(0, torch.tensor([0, 0], device='cuda'), torch.ones(2, device='cuda')))",
    "capture then item": "(lambda g: [torch.cuda.graph(g).__enter__(), torch.ones(1, device='cuda').item()])"
                         "(torch.cuda.CUDAGraph())",
    "batch_norm_stats of half": "[(t.dtype, [round(v, 4) for v in t.tolist()]) for t in torch.batch_norm_stats("
                                "torch.arange(12.0, device='cuda').view(4, 3).half(), 1e-5)]",
    "batch_norm_stats of a constant, eps 0": "torch.batch_norm_stats(torch.ones(2, 1, device='cuda'), 0)[1].tolist()",
    "batch_norm_stats of Long": "torch.batch_norm_stats(torch.ones(2, 3, dtype=torch.long, device='cuda'), 1e-5)",
    "batch_norm_gather_stats_with_counts": "[[round(v, 4) for v in t.tolist()] for t in "
                                           "torch.batch_norm_gather_stats_with_counts(torch.ones(1, 2, device='cuda'), "
                                           "torch.tensor([[1.0, 2.0], [3.0, 4.0]], device='cuda'), "
                                           "torch.tensor([[1.0, 0.5], [2.0, 1.0]], device='cuda'), None, None, 0.1, "
                                           "1e-5, torch.tensor([2.0, 6.0], device='cuda'))]",
    "batch_norm_elemt of half": "torch.batch_norm_elemt(torch.ones(2, 3, dtype=torch.half, device='cuda'), None, "
                                "None, torch.zeros(3, device='cuda'), torch.ones(3, device='cuda'), 1e-5).dtype",
    "batch_norm_backward_reduce, bias only": "[t is None for t in torch.batch_norm_backward_reduce("
                                             "torch.ones(2, 3, device='cuda'), torch.ones(2, 3, device='cuda'), "
                                             "torch.zeros(3, device='cuda'), torch.ones(3, device='cuda'), None, "
                                             "False, False, True)]",
    "cudnn": "(torch.backends.cudnn.is_available(), torch.backends.cudnn.is_acceptable(torch.ones(2, device='cuda')),"
             " torch.backends.cudnn.benchmark_limit)",
    "host gradient": "setattr(torch.ones(2, device='cuda', requires_grad=True), 'grad', torch.zeros(2))",
    "backward with a host gradient": "(torch.ones(2, device='cuda', requires_grad=True) * 2).backward(torch.ones(2))",
    "lengths on the gpu": "torch.nn.utils.rnn.pack_padded_sequence(torch.ones(3, 2, 1, device='cuda'),"
                          " torch.tensor([3, 2], device='cuda'))",
}

RUNNER = """
import json, sys, torch
out = {}
for name, line in json.loads(sys.argv[1]).items():
    try:
        out[name] = repr(eval(line))
    except BaseException as exc:
        out[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    torch.use_deterministic_algorithms(False)
print(json.dumps(out))
"""


def answers(simulated: bool, memory: str | None = None) -> dict[str, str]:
    """Every probe's answer, natively or under cuda-sim (with ``memory`` bytes per GPU)."""
    with tempfile.TemporaryDirectory() as directory:
        runner = os.path.join(directory, "probes.py")
        with open(runner, "w", encoding="utf-8") as file:
            file.write(RUNNER)
        more = ["--gpu-memory", memory] if memory else []
        under = ["-m", "torchdevice", "run", "--target", "cuda-sim", *more] if simulated else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
        done = subprocess.run([sys.executable, *under, runner, json.dumps(PROBES)], capture_output=True, text=True,
                              env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the probes failed ({'cuda-sim' if simulated else 'native'}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-only", action="store_true", help="run the simulated side alone (any machine)")
    args = parser.parse_args(argv)
    if args.sim_only:
        print(json.dumps(answers(True), indent=1))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA here: run with --sim-only, or on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    native = answers(False)
    simulated = answers(True, f"{torch.cuda.get_device_properties(0).total_memory}")
    differing = [name for name in PROBES if native.get(name) != simulated.get(name)]
    for name in differing:
        print(json.dumps({"probe": name, "gpu": native.get(name), "cuda-sim": simulated.get(name)}))
    print(f"{len(PROBES) - len(differing)} of {len(PROBES)} probes answer as on {torch.cuda.get_device_name()}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
