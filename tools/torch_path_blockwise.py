#!/usr/bin/env python3
"""torch_path_blockwise.py: PaTH attention in plain PyTorch (autograd, any device, fp64/fp32/bf16),
by the blockwise UT form of docs/path-attention.md, for timing baselines (torch_train_bench.py).

No Python loop over T and no [T, T, Dh] tensor: one loop over block distances (T / block steps) that
transports all query blocks at once through one more block product, and only the causal block
triangle of the logits is formed. Memory: O(T^2 / 2) logits per head plus O(T^2 Dh / block) of
transported queries kept for autograd. `python3 tools/torch_path_blockwise.py --check` compares it in
float64 (output and every input gradient) with tools/torch_reference.py's explicit-product
path_attention and exits 1 above a relative error of 1e-8.

Conventions (as statebench): q, k, v, w [B, T, H, Dh], beta and log_f [B, T, H];
s_ij = q_i . (H_i ... H_{j+1} k_j) / sqrt(Dh) + sum_{s=j+1..i} log f_s (gate term unscaled),
H_t = I - beta_t w_t w_t^T. Per block of L tokens (rows w_a, D = diag(beta)):
  Tinv = (I + strictLower(D W W^T))^{-1} D,  block product P = H_{L-1} ... H_0 = I - W^T Tinv W,
  intra-block logits lower(Q K^T) - lower(Q W^T) Tinv strictLower(W K^T),
  queries pulled back to the block start  Qs = Q - (lower(Q W^T) Tinv) W,
  keys pushed to the block end            Ke = K - (strictLower(W K^T)^T Tinv^T) W,
and for key block m < query block c (queries as row vectors, G P = G - ((G W^T) Tinv) W):
  S[c, m] = (Qs_c P_{c-1} P_{c-2} ... P_{m+1}) Ke_m^T.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deps import need  # noqa: E402

torch = need("torch_path_blockwise.py", "torch")
import torch.nn.functional as F  # noqa: E402


def _no_autocast(device_type):
    """A context that turns autocast off on `device_type` (PyTorch 1.13 and 2.x)."""
    return torch.autocast(device_type=device_type, enabled=False)


def _to_blocks(x, n, L):
    """[B, T, H, *rest] -> [B, H, n, L, *rest], zero-padded at the end of time to n * L."""
    B, T, H = x.shape[:3]
    rest = x.shape[3:]
    x = x.transpose(1, 2)  # [B, H, T, *rest]
    pad = n * L - T
    if pad:
        x = torch.cat([x, x.new_zeros((B, H, pad) + tuple(rest))], dim=2)
    return x.reshape((B, H, n, L) + tuple(rest))


def _upcast(x):
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def path_logit_blocks(q, k, w, beta, log_f=None, block=32, scale=None, dense_transport=None):
    """PaTH(-FoX) logits by block diagonals: a list whose entry delta is [B, H, n - delta, L, L], the
    (scaled, gated) logits of query block c = delta..n-1 against key block c - delta; entry 0 is
    causally masked with -inf. n = ceil(T / L), L = block; the last block is zero-padded.

    Computes in the dtype of q (float64 for checks, float32 for bf16 training; the triangular solve in
    fp32 at least). dense_transport: None = dense Dh x Dh block products when Dh <= 2 * block.
    """
    B, T, H, Dh = q.shape
    L = int(block)
    n = (T + L - 1) // L
    if scale is None:
        scale = 1.0 / math.sqrt(Dh)
    if dense_transport is None:
        dense_transport = Dh <= 2 * L
    dt, dev = q.dtype, q.device
    qb = _to_blocks(q * scale, n, L)      # [B, H, n, L, Dh]
    kb = _to_blocks(k.to(dt), n, L)
    wb = _to_blocks(w.to(dt), n, L)
    bb = _to_blocks(beta.to(dt), n, L)    # [B, H, n, L]

    lower = torch.ones(L, L, dtype=torch.bool, device=dev).tril()
    strict = lower.tril(-1)
    wt = wb.transpose(-1, -2)                                            # [B, H, n, Dh, L]
    # Tinv = (I + strictLower(D W W^T))^{-1} D: a unit lower-triangular solve per block.
    solve_dt = torch.float64 if dt == torch.float64 else torch.float32
    eye = torch.eye(L, dtype=solve_dt, device=dev)
    A = eye + (bb[..., :, None] * (wb @ wt)).to(solve_dt).masked_fill(~strict, 0.0)
    Ainv = torch.linalg.solve_triangular(A, eye.expand_as(A), upper=False, unitriangular=True)
    tinv = (Ainv * bb.to(solve_dt)[..., None, :]).to(dt)                  # [B, H, n, L, L], column b * beta_b

    qw = (qb @ wt).masked_fill(~lower, 0.0)                               # [.., i, a]  a <= i
    wk = (wb @ kb.transpose(-1, -2)).masked_fill(~strict, 0.0)            # [.., b, j]  b > j
    qwt = qw @ tinv                                                       # [.., i, b]
    diags = [qb @ kb.transpose(-1, -2) - qwt @ wk]                        # intra-block logits
    q_start = qb - qwt @ wb                                               # queries at their block start
    k_end = kb - (wk.transpose(-1, -2) @ tinv.transpose(-1, -2)) @ wb     # keys at their block end

    if dense_transport:
        prod = torch.eye(Dh, dtype=dt, device=dev) - wt @ (tinv @ wb)     # [B, H, n, Dh, Dh] = P_m
        def transport(g, lo, hi):  # g [.., hi-lo, L, Dh] times P_m for m in [lo, hi)
            return g @ prod[:, :, lo:hi]
    else:
        def transport(g, lo, hi):
            return g - ((g @ wt[:, :, lo:hi]) @ tinv[:, :, lo:hi]) @ wb[:, :, lo:hi]

    g = q_start[:, :, 1:]  # delta = 1: query blocks c = 1..n-1, not yet transported
    for delta in range(1, n):
        diags.append(g @ k_end[:, :, : n - delta].transpose(-1, -2))     # [B, H, n - delta, L, L]
        if delta + 1 < n:  # blocks c = delta+1..n-1 move through P_{c - delta}
            g = transport(g[:, :, 1:], 1, n - delta)
    if log_f is not None:  # + sum_{s=j+1..i} log f_s = cum_i - cum_j
        cum = _to_blocks(log_f.to(dt)[..., None], n, L)[..., 0].cumsum(dim=-1)  # within-block cumsum
        cum = cum + F.pad(cum[:, :, :-1, -1].cumsum(dim=-1), (1, 0))[..., None]  # + earlier blocks
        diags = [d + (cum[:, :, delta:, :, None] - cum[:, :, : n - delta, None, :]) for delta, d in enumerate(diags)]
    diags[0] = diags[0].masked_fill(~lower, float("-inf"))
    return diags


def path_attention_blockwise(q, k, v, w, beta, log_f=None, block=32, scores="fp32", dense_transport=None):
    """PaTH(-FoX) causal attention output [B, T, H, Dh] from q, k, v, w [B, T, H, Dh], beta, log_f [B, T, H].

    Only the causal block triangle is computed (softmax over the block diagonals, P V per diagonal).
    scores="fp32": logits and softmax run in float32 with autocast off (float64 inputs stay float64);
    "autocast": the logits follow the ambient autocast / input dtype (the triangular solve stays fp32).
    The probabilities @ V follow autocast / v's dtype, summed over diagonals in fp32 or better.
    """
    B, T, H, Dh = q.shape
    dev = q.device.type
    if scores == "fp32":
        dt = torch.float64 if q.dtype == torch.float64 else torch.float32
        with _no_autocast(dev):
            diags = path_logit_blocks(q.to(dt), k.to(dt), w.to(dt), beta.to(dt),
                                      None if log_f is None else log_f.to(dt), block, dense_transport=dense_transport)
    elif scores == "autocast":
        diags = path_logit_blocks(_upcast(q), _upcast(k), _upcast(w), _upcast(beta),  # matmuls still autocast
                                  None if log_f is None else _upcast(log_f), block, dense_transport=dense_transport)
    else:
        raise ValueError(f"path_attention_blockwise: scores must be 'fp32' or 'autocast', got '{scores}'")
    n, L = diags[0].shape[2], diags[0].shape[3]
    with _no_autocast(dev):  # row log-sum-exp over all diagonals, then probabilities per diagonal
        diags = [_upcast(d) for d in diags]
        lse = [torch.logsumexp(d, dim=-1) for d in diags]                # [B, H, n - delta, L]
        lse = torch.logsumexp(torch.stack([F.pad(x, (0, 0, delta, 0), value=float("-inf"))
                                           for delta, x in enumerate(lse)]), dim=0)  # [B, H, n, L]
        probs = [torch.exp(d - lse[:, :, delta:, :, None]) for delta, d in enumerate(diags)]
    vb = _to_blocks(v, n, L)                                              # [B, H, n, L, Dh]
    out = None
    for delta, p in enumerate(probs):
        part = _upcast(p.to(vb.dtype) @ vb[:, :, : n - delta])            # [B, H, n - delta, L, Dh]
        if delta:
            part = F.pad(part, (0, 0, 0, 0, delta, 0))
        out = part if out is None else out + part
    out = out.reshape(B, H, n * L, Dh)[:, :, :T].to(v.dtype)
    return out.transpose(1, 2)


# ---- self-check against the explicit-product reference ----

def _grads(fn, inputs, dout):
    """Output and input gradients (zeros for unused inputs) of fn(*inputs) against dout."""
    xs = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*xs)
    grads = torch.autograd.grad(out, xs, dout, allow_unused=True)  # T = 1: w, beta unused
    return [out.detach()] + [torch.zeros_like(x) if g is None else g.detach() for x, g in zip(xs, grads)]


def _check(verbose=True):
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_reference  # sets the default dtype to float64 (its zeros rely on it): fine for a check
    dt = torch.float64
    gen = torch.Generator().manual_seed(1234)
    worst, compared = 0.0, 0
    B, H = 2, 2
    for T in (1, 7, 33):
        for block in (8, 16):
            for gate in (False, True):
                for Dh in (8, 20):
                    q, k, v, w = (torch.randn(B, T, H, Dh, generator=gen, dtype=dt) for _ in range(4))
                    w = w / w.norm(dim=-1, keepdim=True)
                    beta = 2 * torch.sigmoid(1.5 * torch.randn(B, T, H, generator=gen, dtype=dt))  # both sides of 1
                    log_f = F.logsigmoid(torch.randn(B, T, H, generator=gen, dtype=dt) + 2) if gate else None
                    dout = torch.randn(B, T, H, Dh, generator=gen, dtype=dt)
                    inputs = [q, k, v, w, beta] + ([log_f] if gate else [])
                    names = ["out", "dq", "dk", "dv", "dw", "dbeta"] + (["dlog_f"] if gate else [])
                    ref = _grads(lambda *a: torch_reference.path_attention(*a[:5], a[5] if gate else None),
                                 inputs, dout)
                    for dense in (True, False):
                        got = _grads(lambda *a: path_attention_blockwise(*a[:5], a[5] if gate else None, block=block,
                                                                         dense_transport=dense), inputs, dout)
                        errs = []
                        for name, a, b in zip(names, got, ref):
                            scale = float(b.abs().max())
                            rel = float((a - b).abs().max()) / (scale if scale > 0 else 1.0)  # 0 ref (T = 1): absolute
                            errs.append(f"{name} {rel:.1e}")
                            worst = max(worst, rel)
                        compared += 1
                        if verbose:
                            print(f"T={T:2d} block={block:2d} Dh={Dh:2d} {'dense   ' if dense else 'factored'} "
                                  f"gate={'yes' if gate else 'no ':3s}: " + ", ".join(errs))
    ok = worst <= 1e-8
    print(f"torch_path_blockwise --check: {compared} cases (forward + all input gradients, float64), "
          f"max relative error {worst:.2e} ({'OK' if ok else 'FAIL'}, limit 1e-8)")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with torch_reference.py in float64")
    args = ap.parse_args()
    if not args.check:
        ap.print_help()
        return 0
    return 0 if _check() else 1


if __name__ == "__main__":
    sys.exit(main())
