"""NCCL's reduce ops on every dtype, through every reducing collective, in an NCCL-written program.

Run with 2 processes under torchdevice. Each rank builds every rank's inputs, computes what NCCL gives from
them here (Python integers, float64 rounded once to the dtype: a sum or product of two values of at most 32
bits is exact in float64), runs each collective (sync and async) and checks its results, that the tensors
NCCL leaves alone are left alone, and that what NCCL refuses raises NCCL's exception at the call. It prints
``rank R ok: N cases``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 2, "the references below are written for two ranks"
device = torch.device("cuda", local_rank)

INTS = {
    torch.uint8: ([1, 3, 200, 255, 7, 0, 128, 5], [2, 4, 100, 255, 9, 0, 129, 0]),
    torch.int8: ([1, -1, 100, -100, 7, -128, 127, 3], [2, -2, 101, -101, -8, -128, 127, 0]),
    torch.int32: ([1, -1, 2**31 - 1, -(2**31), 7, -7, 5, 0], [2, -2, 1, -1, -8, 8, 5, 0]),
    torch.int64: ([1, -1, 2**63 - 1, -(2**63), 7, -7, 5, 0], [2, -2, 1, -1, -8, 8, 5, 0]),
}
BIG = {torch.float16: 60000.0, torch.bfloat16: 3.0e38, torch.float32: 3.0e38, torch.float64: 1.0e308}
FLOATS = {dtype: ([1.5, -2.25, big, math.nan, 0.1, -3.0, math.inf, 3.0, math.nan],
                  [2.5, 1.0, big, 1.0, 0.2, 0.5, 1.0, math.nan, math.nan]) for dtype, big in BIG.items()}
BOOLS = ([True, False, True, False], [True, True, False, False])
COMPLEX = ([1 + 2j, -3 + 0.5j, 0.1 - 0.2j], [0.25 - 1j, 2 + 2j, 0.3 + 0.7j])
REFUSED_DTYPES = {torch.int16: "Short", torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64"}
ATEN_NAMES = {torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble", **REFUSED_DTYPES}
FACTOR = 0.3


def wrap(value: int, dtype: torch.dtype) -> int:
    """``value`` as ``dtype`` holds it (two's complement wrap-around)."""
    info = torch.iinfo(dtype)
    span = info.max - info.min + 1
    return (value - info.min) % span + info.min


def rounded(value: float, dtype: torch.dtype) -> float:
    return torch.tensor(value, dtype=torch.float64).to(dtype).item()


def ignore_nan(pick: Callable[[float, float], float]) -> Callable[[float, float], float]:
    return lambda a, b: b if math.isnan(a) else a if math.isnan(b) else pick(a, b)


def factor_of(op: str, dtype: torch.dtype) -> float:
    """The multiplier of AVG / PREMUL_SUM as NCCL holds it: a host scalar made a float, then the dtype; a
    tensor factor is the tensor's value."""
    if op == "PREMUL_TENSOR":
        return torch.tensor(FACTOR, dtype=dtype).item()
    value = 1.0 / world if op == "AVG" else FACTOR
    return rounded(rounded(value, torch.float32) if dtype != torch.float64 else value, dtype)


def expected(op: str, dtype: torch.dtype, values: list[list]) -> list:
    """What NCCL computes, element by element, from every rank's ``values``."""
    columns = list(zip(*values, strict=True))
    if dtype == torch.bool:
        pick = {"SUM": any, "MAX": any, "PRODUCT": all, "MIN": all}[op]
        return [pick(c) for c in columns]
    if dtype in INTS:
        if op == "AVG":  # the sum wraps around, then its magnitude is divided
            sums = [wrap(sum(c), dtype) for c in columns]
            return [-(-s // world) if s < 0 else s // world for s in sums]
        combine = {"SUM": lambda c: sum(c), "PRODUCT": math.prod, "MIN": min, "MAX": max}[op]
        return [wrap(combine(c), dtype) for c in columns]
    columns = [[rounded(v, dtype) for v in c] for c in columns]  # the values the tensors hold
    if op in ("AVG", "PREMUL", "PREMUL_TENSOR"):
        scale = factor_of(op, dtype)
        columns = [[rounded(v * scale, dtype) for v in c] for c in columns]
        op = "SUM"
    pick = {"SUM": lambda a, b: a + b, "PRODUCT": lambda a, b: a * b,
            "MIN": ignore_nan(min), "MAX": ignore_nan(max)}[op]
    out = []
    for column in columns:
        total = column[0]
        for v in column[1:]:
            total = rounded(pick(total, v), dtype)
        out.append(total)
    return out


def reduce_op(op: str, dtype: torch.dtype):
    if op == "PREMUL":
        return dist._make_nccl_premul_sum(FACTOR)
    if op == "PREMUL_TENSOR":
        return ReduceOp.PREMUL_SUM(torch.tensor([FACTOR], dtype=dtype, device=device))
    return getattr(ReduceOp, op)


def refusal(op: str, dtype: torch.dtype, collective: str) -> tuple[type, str] | None:
    """NCCL's exception for ``op`` on ``dtype`` (torch's ProcessGroupNCCL and distributed_c10d), if any."""
    if dtype.is_complex:
        if collective == "reduce_scatter":
            return TypeError, f"Input tensor data type is not supported for NCCL process group: {ATEN_NAMES[dtype]}"
        if op not in ("SUM", "AVG", "PREMUL", "PREMUL_TENSOR"):
            return (RuntimeError, "reduce does not support") if collective == "reduce" else (ValueError, "all_reduce")
        return None
    if dtype in REFUSED_DTYPES:
        return TypeError, f"Input tensor data type is not supported for NCCL process group: {ATEN_NAMES[dtype]}"
    if dtype in (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        return RuntimeError, "Unsupported Float8 type for NCCL reduction"
    if dtype == torch.bool and op == "AVG":
        return TypeError, "Cannot use ReduceOp.AVG with boolean inputs"
    if op.startswith("PREMUL") and dtype not in FLOATS:
        return TypeError, "PreMulSum Data type must be half, float, bfloat16 or double"
    if op in ("BAND", "BOR", "BXOR"):
        return ValueError, f"Cannot use ReduceOp.{op} with NCCL"
    return None


def inputs(dtype: torch.dtype) -> list[list]:
    if dtype == torch.bool:
        return [list(v) for v in BOOLS]
    if dtype in INTS:
        return [list(v) for v in INTS[dtype]]
    if dtype.is_complex:
        return [list(v) for v in COMPLEX]
    if dtype in FLOATS:
        return [list(v) for v in FLOATS[dtype]]
    return [[1, 2, 3, 4], [5, 6, 7, 8]]


def tensor(values: list, dtype: torch.dtype) -> torch.Tensor:
    if dtype.itemsize == 1 and dtype.is_floating_point:  # float8: made from float32
        return torch.tensor(values, dtype=torch.float32).to(dtype).to(device)
    return torch.tensor(values, dtype=dtype, device=device)


def same(got: torch.Tensor, want: list, dtype: torch.dtype, what: str) -> None:
    assert got.dtype == dtype, (what, got.dtype)
    reference = torch.tensor(want, dtype=dtype)
    torch.testing.assert_close(got.cpu(), reference, rtol=0, atol=0, equal_nan=True,
                               msg=lambda m: f"rank {rank} {what}: {m}")


def complex_expected(op: str, dtype: torch.dtype, values: list[list]) -> list:
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    re = expected(op, real, [[v.real for v in r] for r in values])
    im = expected(op, real, [[v.imag for v in r] for r in values])
    return [complex(a, b) for a, b in zip(re, im, strict=True)]


def answer(op: str, dtype: torch.dtype, values: list[list]) -> list:
    return complex_expected(op, dtype, values) if dtype.is_complex else expected(op, dtype, values)


def run_case(op: str, dtype: torch.dtype) -> int:
    """Every reducing collective for ``op`` on ``dtype``; the number of calls made."""
    mine = inputs(dtype)
    flipped = [list(reversed(v)) for v in mine]
    calls = {
        "all_reduce": lambda ro, a: dist.all_reduce(t := tensor(mine[rank], dtype), ro, async_op=a) or t,
        "reduce": lambda ro, a: dist.reduce(tensor(mine[rank], dtype), dst=1, op=ro, async_op=a),
        "reduce_scatter": lambda ro, a: dist.reduce_scatter_tensor(
            tensor(mine[rank], dtype), torch.cat([tensor(mine[rank], dtype), tensor(flipped[rank], dtype)]), ro,
            async_op=a),
        "coalesced": lambda ro, a: dist.all_reduce_coalesced([tensor(mine[rank], dtype)], ro, async_op=a),
    }
    made = 0
    for name, call in calls.items():
        collective = "reduce_scatter" if name == "reduce_scatter" else "reduce" if name == "reduce" else "all_reduce"
        refused = refusal(op, dtype, collective)
        if refused is None:
            continue
        for asynchronous in (False, True):
            kind, text = refused
            try:
                call(reduce_op(op, dtype), asynchronous)
            except kind as error:
                assert text in str(error), (op, dtype, name, str(error))
            else:
                raise AssertionError(f"{op} {dtype} {name}: NCCL refuses it, it ran")
            made += 1
    for asynchronous in (False, True):
        ro = reduce_op(op, dtype)
        if refusal(op, dtype, "all_reduce") is None:
            want = answer(op, dtype, mine)
            t = tensor(mine[rank], dtype)
            work = dist.all_reduce(t, ro, async_op=asynchronous)
            if asynchronous:
                work.wait()
            same(t, want, dtype, f"all_reduce {op} async={asynchronous}")

            pair = [tensor(mine[rank], dtype), tensor(flipped[rank], dtype)]
            future = dist.all_reduce_coalesced(pair, ro, async_op=asynchronous)
            if asynchronous:
                future.wait()
            same(pair[0], want, dtype, f"all_reduce_coalesced {op}")
            same(pair[1], answer(op, dtype, flipped), dtype, f"all_reduce_coalesced {op} second")
            made += 2
        if refusal(op, dtype, "reduce") is None:
            for dst in (0, 1):
                t = tensor(mine[rank], dtype)
                work = dist.reduce(t, dst=dst, op=ro, async_op=asynchronous)
                if asynchronous:
                    work.wait()
                same(t, answer(op, dtype, mine) if rank == dst else mine[rank], dtype, f"reduce {op} to {dst}")
                made += 1
        if refusal(op, dtype, "reduce_scatter") is None:
            source = torch.cat([tensor(mine[rank], dtype), tensor(flipped[rank], dtype)])
            kept = source.clone()
            out = tensor(mine[rank], dtype)
            work = dist.reduce_scatter_tensor(out, source, ro, async_op=asynchronous)
            if asynchronous:
                work.wait()
            same(out, answer(op, dtype, mine if rank == 0 else flipped), dtype, f"reduce_scatter_tensor {op}")
            same(source, kept.cpu().tolist(), dtype, f"reduce_scatter_tensor {op} input")
            out = tensor(mine[rank], dtype)
            work = dist.reduce_scatter(out, [tensor(mine[rank], dtype), tensor(flipped[rank], dtype)], ro,
                                       async_op=asynchronous)
            if asynchronous:
                work.wait()
            same(out, answer(op, dtype, mine if rank == 0 else flipped), dtype, f"reduce_scatter {op}")
            made += 2
    return made


OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL", "PREMUL_TENSOR", "BAND", "BOR", "BXOR"]
DTYPES = [torch.bool, *INTS, *FLOATS, torch.complex64, torch.complex128, *REFUSED_DTYPES,
          torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
cases = 0
for op in OPS:
    for dtype in DTYPES:
        if op == "PREMUL_TENSOR" and dtype not in FLOATS:
            continue  # a tensor factor of another dtype is refused on its own (below)
        cases += run_case(op, dtype)

# Lightning's sync_dist: AVG of an int64 counter, in place, as NCCL averages integers.
count = torch.tensor([7 + rank * 4], device=device)
dist.all_reduce(count, op=ReduceOp.AVG)
assert count.item() == 9 and count.dtype == torch.int64, count

# A tensor factor must have the tensor's dtype.
try:
    dist.all_reduce(torch.ones(2, device=device), op=ReduceOp.PREMUL_SUM(torch.tensor([0.5], dtype=torch.float64)))
except RuntimeError as error:
    assert "expected scalar type Float but found Double" in str(error), error
else:
    raise AssertionError("a float64 factor of a float32 tensor ran")

# A group asked for gloo keeps gloo's reductions: bitwise ops, which NCCL refuses.
gloo = dist.new_group(backend="gloo")
t = torch.tensor([6, 3], dtype=torch.int32) << rank
dist.all_reduce(t, op=ReduceOp.BAND, group=gloo)
assert t.tolist() == [6 & 12, 3 & 6], t

dist.destroy_process_group()
print(f"rank {rank} ok: {cases} cases", flush=True)
