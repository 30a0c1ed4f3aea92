"""The MLX route against CPU torch: generated shims (conversion both ways included) on a large
elementwise op, a reduction and a matmul, the same ops on MLX arrays alone, and conversion cost."""

from __future__ import annotations

from bench.timing import compare, per_call

MB = 1 << 20


def run():
    import mlx.core as mx
    import torch
    from torchdevice_generated.mlx_shims import SHIMS

    from torchdevice.fallback import mlx_bridge

    torch.manual_seed(0)
    a, b = torch.randn(4096, 1024), torch.randn(4096, 1024)  # 16 MiB each
    m1, m2 = torch.randn(1024, 1024), torch.randn(1024, 1024)
    xa, xb, x1, x2 = (mlx_bridge.to_mlx(t) for t in (a, b, m1, m2))
    cases = [
        ("add_4096x1024", lambda: SHIMS["add"](self=a, other=b), lambda: torch.add(a, b),
         lambda: mx.eval(mx.add(xa, xb))),
        ("sum_dim1_4096x1024", lambda: SHIMS["sum"](self=a, dim=[1]), lambda: torch.sum(a, 1),
         lambda: mx.eval(mx.sum(xa, axis=1))),
        ("matmul_1024", lambda: SHIMS["mm"](self=m1, mat2=m2), lambda: torch.matmul(m1, m2),
         lambda: mx.eval(mx.matmul(x1, x2))),
    ]
    for name, shim, torch_cpu, mlx_only in cases:
        row = compare(f"shim_vs_torch_cpu:{name}", shim, torch_cpu, number=5, repeat=3, rounds=2)
        row["mlx_only_s"] = per_call(mlx_only, number=5, repeat=3)
        yield row

    big = torch.randn(16 * MB // 4)  # 16 MiB
    to_mlx = per_call(lambda: mx.eval(mlx_bridge.to_mlx(big)), number=5, repeat=3)
    array = mlx_bridge.to_mlx(big)
    mx.eval(array)
    to_torch = per_call(lambda: mlx_bridge.to_torch(array), number=1000, repeat=5)
    yield {"name": "to_mlx_16MiB", "seconds": to_mlx, "ms_per_MiB": to_mlx * 1e3 / 16, "copies": True}
    yield {"name": "to_torch_16MiB", "seconds": to_torch, "ms_per_MiB": to_torch * 1e3 / 16, "copies": False}
    small = torch.randn(16)
    yield {"name": "round_trip_16_floats", "seconds": per_call(lambda: mlx_bridge.to_torch(mlx_bridge.to_mlx(small)))}
