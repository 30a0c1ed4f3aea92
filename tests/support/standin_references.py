"""Plain-torch references for the stand-ins, written from the libraries' documentation: attention with an
explicit mask built query by query, key by key, in float64; norms and optimizers from their formulas.
Each ``check_<reference>(function, name, args)`` builds inputs from a grid case (``codegen/plan/standins.py``),
calls the stand-in and the reference the same way and compares outputs and gradients with dtype tolerances."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

TOLERANCE = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
"""rtol = atol of outputs per input dtype (gradients: twice as much)."""


def dtype_of(args: dict[str, Any]) -> torch.dtype:
    return getattr(torch, args.get("dtype", "float32"))


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    tol = TOLERANCE[dtype] * scale
    torch.testing.assert_close(actual.double(), expected.double(), rtol=tol, atol=tol)


def allowed(i: int, j: int, sq: int, sk: int, causal: bool, window: tuple[int, int]) -> bool:
    """flash-attn's documentation: query i sees keys in [i + sk - sq - left, i + sk - sq + right], causal
    meaning right = 0, a negative bound unbounded."""
    left, right = window[0], 0 if causal else window[1]
    centre = i + sk - sq
    return (left < 0 or j >= centre - left) and (right < 0 or j <= centre + right)


def attention(q, k, v, mask, scale=None, softcap=0.0, bias=None):
    """``q`` (B, Sq, H, D), ``k``/``v`` (B, Sk, Hk, D), ``mask`` (B, Sq, Sk) bool, ``bias`` (B, H, Sq, Sk);
    float64; a query with no key gives zeros."""
    h, hk = q.shape[2], k.shape[2]
    k, v = k.repeat_interleave(h // hk, dim=2), v.repeat_interleave(h // hk, dim=2)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bihd,bjhd->bhij", q.double(), k.double()) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.double()
    s = s.masked_fill(~mask[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhij,bjhd->bihd", p, v.double())


def flash_mask(batch: int, sq: int, sk: int, causal: bool, window) -> torch.Tensor:
    return torch.tensor([[[allowed(i, j, sq, sk, causal, tuple(window)) for j in range(sk)] for i in range(sq)]
                         for _ in range(batch)], dtype=torch.bool)


def alibi_bias(slopes: torch.Tensor, batch: int, heads: int, sq: int, sk: int) -> torch.Tensor:
    """-slope * |i + sk - sq - j|, slopes (heads,) or (batch, heads)."""
    per = slopes.expand(batch, heads)
    return torch.tensor([[[[-float(per[b, h]) * abs(i + sk - sq - j) for j in range(sk)] for i in range(sq)]
                          for h in range(heads)] for b in range(batch)], dtype=torch.float64)


def leaves(dtype, *shapes):
    return [torch.randn(*s, dtype=torch.float32).to(dtype).requires_grad_() for s in shapes]


def grads_close(outs: tuple[torch.Tensor, torch.Tensor], inputs, dtype) -> None:
    """Backpropagate one upstream gradient through the stand-in's output and the reference's; compare."""
    out, expected = outs
    upstream = torch.randn(out.shape).to(dtype)
    copies = [x.detach().double().requires_grad_() for x in inputs]
    got = torch.autograd.grad(out, inputs, upstream)
    want = torch.autograd.grad(expected(copies), copies, upstream.double())
    for g, w in zip(got, want, strict=True):
        close(g, w, dtype, scale=4 if dtype != torch.float32 else 2)


def check_attention(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    b, sq, sk, h, hk, d = map(int, args["shape"].split(","))
    dtype = dtype_of(args)
    q, k, v = leaves(dtype, (b, sq, h, d), (b, sk, hk, d), (b, sk, hk, d))
    causal, window = args.get("causal", False), tuple(args.get("window_size", (-1, -1)))
    softcap, scale = args.get("softcap", 0.0), args.get("softmax_scale")
    slopes = (torch.rand(b, h) if b > 1 else torch.rand(h)) if args.get("alibi_slopes") else None
    options = dict(causal=causal, window_size=window, softcap=softcap, alibi_slopes=slopes, softmax_scale=scale)
    if name.endswith("qkvpacked_func"):
        out = function(torch.stack([q, k, v], dim=2), **options)
    elif name.endswith("kvpacked_func"):
        out = function(q, torch.stack([k, v], dim=2), **options)
    else:
        out = function(q, k, v, **options)
    mask = flash_mask(b, sq, sk, causal, window)
    bias = None if slopes is None else alibi_bias(slopes, b, h, sq, sk)
    expected = lambda x: attention(*x, mask, scale, softcap, bias)  # noqa: E731
    assert out.shape == q.shape and out.dtype == dtype
    close(out, expected([q, k, v]), dtype)
    grads_close((out, expected), [q, k, v], dtype)


def cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def check_varlen(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    lengths, h, hk, d = args["shape"].split(",")
    lq, lk = ([int(n) for n in part.split("+")] for part in lengths.split("/"))
    h, hk, d = int(h), int(hk), int(d)
    dtype = dtype_of(args)
    q, k, v = leaves(dtype, (sum(lq), h, d), (sum(lk), hk, d), (sum(lk), hk, d))
    causal, window = args.get("causal", False), tuple(args.get("window_size", (-1, -1)))
    softcap = args.get("softcap", 0.0)
    slopes = torch.rand(h) if args.get("alibi_slopes") else None
    options = dict(causal=causal, window_size=window, softcap=softcap, alibi_slopes=slopes)
    if name.endswith("varlen_qkvpacked_func"):
        out = function(torch.stack([q, k, v], dim=1), cu(lq), max(lq), **options)
    elif name.endswith("kvpacked_func"):
        out = function(q, torch.stack([k, v], dim=1), cu(lq), cu(lk), max(lq), max(lk), **options)
    else:
        out = function(q, k, v, cu(lq), cu(lk), max(lq), max(lk), **options)

    def expected(x):
        """One sequence at a time, each with its own bottom-right alignment."""
        parts, (sq0, sk0) = [], (0, 0)
        for nq, nk in zip(lq, lk, strict=True):
            qi, ki, vi = x[0][sq0:sq0 + nq][None], x[1][sk0:sk0 + nk][None], x[2][sk0:sk0 + nk][None]
            bias = None if slopes is None else alibi_bias(slopes, 1, h, nq, nk)
            parts.append(attention(qi, ki, vi, flash_mask(1, nq, nk, causal, window), None, softcap, bias)[0])
            sq0, sk0 = sq0 + nq, sk0 + nk
        return torch.cat(parts)

    assert out.shape == q.shape and out.dtype == dtype
    close(out, expected([q, k, v]), dtype)
    grads_close((out, expected), [q, k, v], dtype)


def rotate(x: torch.Tensor, angles: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Rotary embedding as complex multiplication: pairs (x0, x1), (x2, x3)... (interleaved) or (x_i, x_{i+n})
    (halves) of the first ``2 * angles.shape[-1]`` features, rotated by ``angles`` (..., n)."""
    n = angles.shape[-1]
    head, rest = x[..., :2 * n].double(), x[..., 2 * n:].double()
    pairs = head.unflatten(-1, (n, 2)) if interleaved else torch.stack(head.split(n, dim=-1), dim=-1)
    turn = torch.polar(torch.ones_like(angles.double()), angles.double())
    turned = torch.view_as_real(torch.view_as_complex(pairs.contiguous()) * turn)
    head = turned.flatten(-2) if interleaved else torch.cat(turned.unbind(-1), dim=-1)
    return torch.cat([head, rest], dim=-1)


def check_kvcache(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    b, sq, cache, h, hk, d = map(int, args["shape"].split(","))
    dtype, causal = dtype_of(args), args.get("causal", False)
    new = sq if args.get("k") else 0
    rows = b + 1 if args.get("cache_batch_idx") else b
    k_cache, v_cache = torch.randn(rows, cache, hk, d).to(dtype), torch.randn(rows, cache, hk, d).to(dtype)
    q = torch.randn(b, sq, h, d).to(dtype)
    k, v = (torch.randn(b, new, hk, d).to(dtype), torch.randn(b, new, hk, d).to(dtype)) if new else (None, None)
    seqlens = torch.randint(1 if not new else 0, cache - new + 1, (b,), dtype=torch.int32)
    index = torch.randperm(rows)[:b].to(torch.int32) if args.get("cache_batch_idx") else None
    angles = torch.rand(cache + sq, d // 4) * 3 if args.get("rotary_cos") else None  # q may rotate past the cache
    interleaved = args.get("rotary_interleaved", True)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    out = function(q, k_cache, v_cache, k, v, rotary_cos=None if angles is None else angles.cos(),
                   rotary_sin=None if angles is None else angles.sin(), cache_seqlens=seqlens,
                   cache_batch_idx=index, causal=causal, rotary_interleaved=interleaved)
    for i in range(b):
        row, start = int(index[i]) if index is not None else i, int(seqlens[i])
        kc, vc = k_before[row].double(), v_before[row].double()
        qi = q[i].double()
        if new:
            ki = k[i].double() if angles is None else rotate(k[i], angles[start:start + new, None], interleaved)
            kc[start:start + new], vc[start:start + new] = ki.to(dtype).double(), v[i].double()
        if angles is not None:
            at = torch.arange(start, start + sq) if causal else torch.full((sq,), start)
            qi = rotate(q[i], angles[at][:, None], interleaved).to(dtype)
        length = start + new
        close(k_cache[row], kc.to(dtype), dtype)
        close(v_cache[row], vc.to(dtype), dtype)
        mask = flash_mask(1, sq, length, causal, (-1, -1))
        want = attention(qi[None], kc[None, :length], vc[None, :length], mask)[0]
        close(out[i], want, dtype, scale=4 if angles is not None else 1)


def check_padding(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    b, s, f = map(int, args["shape"].split(","))
    dtype = dtype_of(args)
    x = torch.randn(b, s, f).to(dtype).requires_grad_()
    mask = torch.rand(b, s) < 0.6
    mask[:, 0] = True
    unused = (torch.rand(b, s) < 0.5) & ~mask if args.get("unused_mask") else None
    kept = mask if unused is None else mask | unused
    positions = [(i, j) for i in range(b) for j in range(s) if kept[i, j]]
    packed = torch.stack([x[i, j] for i, j in positions])
    flat_index = torch.tensor([i * s + j for i, j in positions])
    if name.endswith("unpad_input"):
        out, indices, cu_seqlens, longest, used = function(x, mask.int(), None if unused is None else unused.int())
        close(out, packed, dtype)
        assert indices.tolist() == flat_index.tolist()
        lengths = kept.sum(1).tolist()
        assert cu_seqlens.dtype == torch.int32 and cu_seqlens.tolist() == cu(lengths).tolist()
        assert longest == max(lengths) and used.tolist() == mask.sum(1).tolist()
    elif name.endswith("pad_input"):
        out = function(packed, flat_index, b, s)
        close(out, x * kept[..., None], dtype)
        grads_close((out, lambda c: c[0] * kept[..., None]), [x], dtype)
    else:
        out = function(x.reshape(b * s, f), flat_index)
        close(out, packed, dtype)


def xformers_mask(kind: str, lq: list[int], lk: list[int]) -> torch.Tensor:
    """xformers' documentation: LowerTriangularMask hides keys after the query (top-left);
    ...FromBottomRight aligns the diagonal to the bottom-right; block-diagonal masks keep each query to
    its own sequence, causal per sequence."""
    m, n = sum(lq), sum(lk)
    keep = torch.zeros(m, n, dtype=torch.bool)
    if not kind.startswith("BlockDiagonal"):
        for i in range(m):
            for j in range(n):
                keep[i, j] = {"none": True, "tensor": True, "LowerTriangularMask": j <= i,
                              "LowerTriangularMaskWithTensorBias": j <= i,
                              "LowerTriangularFromBottomRightMask": j <= i + n - m}[kind]
        return keep
    q0 = k0 = 0
    for nq, nk in zip(lq, lk, strict=True):
        for i in range(nq):
            for j in range(nk):
                keep[q0 + i, k0 + j] = {"BlockDiagonalMask": True, "BlockDiagonalCausalMask": j <= i,
                                        "BlockDiagonalCausalFromBottomRightMask": j <= i + nk - nq}[kind]
        q0, k0 = q0 + nq, k0 + nk
    return keep


def check_xformers(function: Callable, name: str, args: dict[str, Any]) -> None:
    from xformers.ops.fmha import attn_bias as biases

    torch.manual_seed(0)
    b, mq, nk, h, hk, d = args["shape"].split(",")
    lq, lk = [int(n) for n in mq.split("+")], [int(n) for n in nk.split("+")]
    b, h, hk, d = int(b), int(h), int(hk), int(d)
    dtype, kind = dtype_of(args), args["attn_bias"]
    q, k, v = leaves(dtype, (b, sum(lq), h, d), (b, sum(lk), hk, d), (b, sum(lk), hk, d))
    tensor = torch.randn(b, h, sum(lq), sum(lk))
    bias: Any = {"none": None, "tensor": tensor.to(dtype),
                 "LowerTriangularMaskWithTensorBias": biases.LowerTriangularMask().add_bias(tensor)}.get(kind)
    if kind.startswith("BlockDiagonal"):
        bias = getattr(biases, kind).from_seqlens(lq, lk)
    elif bias is None and kind != "none":
        bias = getattr(biases, kind)()
    out = function(q, k, v, attn_bias=bias, scale=args.get("scale"))
    mask = xformers_mask(kind, lq, lk).expand(b, -1, -1)
    extra = {"tensor": tensor.to(dtype), "LowerTriangularMaskWithTensorBias": tensor}.get(kind)
    expected = lambda x: attention(*x, mask, args.get("scale"), 0.0, extra)  # noqa: E731
    assert out.shape == q.shape and out.dtype == dtype
    close(out, expected([q, k, v]), dtype)
    grads_close((out, expected), [q, k, v], dtype)


def check_norm(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    shape = tuple(map(int, args["shape"].split(",")))
    n, dtype = shape[-1], dtype_of(args)
    rms, mixed = "rms" in name.lower(), "mixed" in name.lower()
    x = (torch.randn(shape) * 3 + 1).to(dtype).requires_grad_()
    affine = args.get("elementwise_affine", True)
    param_dtype = torch.float32 if mixed else dtype
    w = (torch.rand(n) + 0.5).to(param_dtype).requires_grad_()
    bias = torch.randn(n).to(param_dtype).requires_grad_()
    eps = 1e-5
    if isinstance(function, type):
        module = function(n, eps=eps) if mixed else function(n, eps=eps, elementwise_affine=affine)
        with torch.no_grad():
            if module.weight is not None:
                module.weight.copy_(w)
            if getattr(module, "bias", None) is not None:
                module.bias.copy_(bias)
        module.to(param_dtype)
        out = module(x)
        inputs = [x, *(p for p in module.parameters())]
    else:
        affine = "affine" in name
        call = [x, *([w] if affine else []), *([bias] if affine and not rms else []), (n,)]
        out = function(*call, eps=eps)
        inputs = [x, *([w] if affine else []), *([bias] if affine and not rms else [])]

    def expected(c):
        z = c[0]
        if rms:
            y = z / torch.sqrt((z * z).mean(-1, keepdim=True) + eps)
        else:
            mean = z.mean(-1, keepdim=True)
            y = (z - mean) / torch.sqrt(((z - mean) ** 2).mean(-1, keepdim=True) + eps)
        if affine:
            y = y * c[1] + (0 if rms else c[2])
        return y

    assert out.dtype == (param_dtype if mixed else dtype)
    close(out, expected([t.double() for t in inputs]), dtype)
    grads_close((out, expected), inputs, dtype)


def _train(optimizer_of: Callable, steps: int = 3) -> list[torch.Tensor]:
    torch.manual_seed(0)
    params = [torch.randn(3, 4, requires_grad=True), torch.randn(5, requires_grad=True)]
    optimizer = optimizer_of(params)
    for step in range(steps):
        loss = (params[0] ** 2).sum() * (step + 1) + (params[1] * torch.arange(5.0)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [p.detach() for p in params]


class ReferenceAdam:
    """Adam (Kingma & Ba) with apex's options: L2 decay added to the gradient, or decoupled (AdamW)."""

    def __init__(self, params, lr, betas, eps, weight_decay, adam_w_mode, bias_correction):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.decay, self.decoupled, self.correct = weight_decay, adam_w_mode, bias_correction
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad if self.decoupled else p.grad + self.decay * p
            self.m[i] = b1 * self.m[i] + (1 - b1) * g
            self.v[i] = b2 * self.v[i] + (1 - b2) * g * g
            m_hat = self.m[i] / (1 - b1 ** self.t) if self.correct else self.m[i]
            v_hat = self.v[i] / (1 - b2 ** self.t) if self.correct else self.v[i]
            if self.decoupled:
                p -= self.lr * self.decay * p
            p -= self.lr * m_hat / (v_hat.sqrt() + self.eps)


def check_adam(function: Callable, name: str, args: dict[str, Any]) -> None:
    options = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=args["weight_decay"],
                   adam_w_mode=args["adam_w_mode"], bias_correction=args["bias_correction"])
    got = _train(lambda params: function(params, **options))
    want = _train(lambda params: ReferenceAdam(params, **options))
    for g, w in zip(got, want, strict=True):
        close(g, w, torch.float32, scale=10)


class ReferenceSGD:
    """SGD as torch documents it: decay, momentum buffer (dampening), Nesterov."""

    def __init__(self, params, lr, momentum, weight_decay, nesterov):
        self.params, self.lr, self.momentum, self.decay, self.nesterov = params, lr, momentum, weight_decay, nesterov
        self.buffers: list[torch.Tensor | None] = [None] * len(params)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for i, p in enumerate(self.params):
            g = p.grad + self.decay * p
            if self.momentum:
                buf = self.buffers[i]
                self.buffers[i] = buf = g.clone() if buf is None else self.momentum * buf + g
                g = g + self.momentum * buf if self.nesterov else buf
            p -= self.lr * g


def check_sgd(function: Callable, name: str, args: dict[str, Any]) -> None:
    if args["nesterov"] and not args["momentum"]:
        args = {**args, "nesterov": False}  # Nesterov needs momentum (torch refuses it, as apex does)
    options = dict(lr=0.05, momentum=args["momentum"], weight_decay=args["weight_decay"], nesterov=args["nesterov"])
    got = _train(lambda params: function(params, **options))
    want = _train(lambda params: ReferenceSGD(params, **options))
    for g, w in zip(got, want, strict=True):
        close(g, w, torch.float32, scale=10)


CHECKS = {name.removeprefix("check_"): f for name, f in globals().items() if name.startswith("check_")}
