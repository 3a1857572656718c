#!/usr/bin/env python3
"""torch_reference.py: an independent PyTorch (float64) rebuild of statebench's CPU models.

Reads a golden-fixture directory written by statebench (config.json, params/*.npy, inputs), rebuilds
the model with plain autograd (PaTH computed by explicit Householder products, no blockwise trick),
and writes the reference logits, loss, every gradient and the parameters after N AdamW steps.
The ctest `test_golden` compares statebench against these files. Runs with Debian's python3-torch
(1.13) or any later PyTorch:  python3 tools/torch_reference.py tests/golden/<name>
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deps import need  # noqa: E402

np = need("torch_reference.py", "numpy")
torch = need("torch_reference.py", "torch")
import torch.nn.functional as F  # noqa: E402

torch.set_default_dtype(torch.float64)


def load_npy_dir(path):
    out = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".npy"):
            out[name[:-4]] = torch.from_numpy(np.load(os.path.join(path, name)).astype(np.float64))
    return out


def save_npy(path, tensor):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, tensor.detach().cpu().numpy().astype(np.float64))


# ---- ops, written from the math (docs/path-attention.md), not from statebench's code ----

def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b


def rope(x, theta):  # x [B, T, H, Dh]; half-split (rotate_half) convention, positions from 0
    B, T, H, Dh = x.shape
    half = Dh // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64) * 2.0 / Dh)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # [T, half]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def gate_bias(log_f):  # log_f [B, T, H] -> [B, H, T, T] with entry (i, j) = sum_{s=j+1..i} log f_s
    c = log_f.cumsum(dim=1).permute(0, 2, 1)  # [B, H, T]
    return c[:, :, :, None] - c[:, :, None, :]


def causal_softmax_attention(scores, v):  # scores [B, H, T, T], v [B, T, H, Dh]
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    p = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return torch.einsum("bhij,bjhd->bihd", p, v)


def softmax_attention(q, k, v, log_f=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    if log_f is not None:
        s = s + gate_bias(log_f)
    return causal_softmax_attention(s, v)


def path_attention(q, k, v, w, beta, log_f=None):
    """s_ij = q_i . (H_i ... H_{j+1} k_j) / sqrt(d), H_t = I - beta_t w_t w_t^T, by explicit products."""
    B, T, H, Dh = q.shape
    scale = 1.0 / math.sqrt(Dh)
    rows = []
    for i in range(T):
        cols = []
        for j in range(T):
            if j > i:
                cols.append(torch.zeros(B, H))
                continue
            kv = k[:, j]  # [B, H, Dh]; push k_j through H_{j+1}, ..., H_i in that order
            for t in range(j + 1, i + 1):
                wt, bt = w[:, t], beta[:, t]
                kv = kv - bt[..., None] * (kv * wt).sum(-1, keepdim=True) * wt
            cols.append((q[:, i] * kv).sum(-1) * scale)
        rows.append(torch.stack(cols, dim=-1))  # [B, H, T]
    s = torch.stack(rows, dim=-2)  # [B, H, T(i), T(j)]
    if log_f is not None:
        s = s + gate_bias(log_f)
    return causal_softmax_attention(s, v)


def sba_attention(q, k, v, remainder):
    """Stick-breaking attention (docs/attention.md): keys j < i, A_ij = sigmoid(z_ij) prod_{j<l<i} (1 - sigmoid(z_il)),
    out_i = sum_j A_ij v_j (+ r_i v_i, r_i = prod_{j<i} (1 - sigmoid(z_ij)), with the remainder); in log space."""
    T = q.shape[1]
    z = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
    strict = torch.ones(T, T, dtype=torch.bool).tril(-1)  # j < i
    log_keep = F.logsigmoid(-z).masked_fill(~strict, 0.0)  # log (1 - beta), 0 off the keys
    after = log_keep.flip(-1).cumsum(-1).flip(-1) - log_keep  # sum over the keys l > j (all of them are < i)
    att = (F.logsigmoid(z) + after).masked_fill(~strict, float("-inf")).exp()
    out = torch.einsum("bhij,bjhd->bihd", att, v)
    if remainder:
        rem = log_keep.sum(-1).exp()  # [B, H, T]
        out = out + rem.permute(0, 2, 1)[..., None] * v
    return out


def w_path(u, conv_w, conv_b, H, Dh, eps):  # u [B, T, H*Dh] -> w [B, T, H, Dh]
    B, T, C = u.shape
    pad = torch.cat([torch.zeros(B, 2, C), u], dim=1)
    y = sum(conv_w[:, k] * pad[:, k:k + T] for k in range(3))  # tap k multiplies u_{t-2+k}
    if conv_b is not None:
        y = y + conv_b
    y = F.silu(y).reshape(B, T, H, Dh)
    return y / torch.sqrt((y * y).sum(-1, keepdim=True) + eps)


# ---- the model ----

class Model:
    def __init__(self, cfg, params):
        self.c, self.p = cfg, params

    def norm(self, x, prefix):
        c, p = self.c, self.p
        if c["norm"] == "rmsnorm":
            return rmsnorm(x, p[prefix + ".weight"], c["norm_eps"])
        return layernorm(x, p[prefix + ".weight"], p[prefix + ".bias"], c["norm_eps"])

    def attention(self, h, l, kind):
        c, p = self.c, self.p
        pre = f"layers.{l}.attn."
        B, T, _ = h.shape
        H, Dh = c["n_heads"], c["head_dim"]
        q = (h @ p[pre + "wq"].T).reshape(B, T, H, Dh)
        k = (h @ p[pre + "wk"].T).reshape(B, T, H, Dh)
        v = (h @ p[pre + "wv"].T).reshape(B, T, H, Dh)
        log_f = None
        if kind in ("fox", "path_fox"):
            log_f = F.logsigmoid(h @ p[pre + "wf"].T + p[pre + "bf"])
        if kind == "rope":
            q, k = rope(q, c["rope_theta"]), rope(k, c["rope_theta"])
        if kind in ("path", "path_fox"):
            u = (h @ p[pre + "w1"].T) @ p[pre + "w2"].T
            w = w_path(u, p[pre + "conv"], p.get(pre + "conv_bias"), H, Dh, c["l2norm_eps"])
            beta = 2.0 * torch.sigmoid(h @ p[pre + "wbeta"].T + p[pre + "bbeta"])
            if c.get("beta_clamp", 0) > 0:
                beta = beta.clamp(max=c["beta_clamp"])
            o = path_attention(q, k, v, w, beta, log_f)
        elif kind == "sba":
            o = sba_attention(q, k, v, c.get("sba_remainder", "current") == "current")
        else:
            o = softmax_attention(q, k, v, log_f)
        return o.reshape(B, T, H * Dh) @ p[pre + "wo"].T

    def mlp(self, h, l):
        c, p = self.c, self.p
        pre = f"layers.{l}.mlp."
        if c["mlp"] == "swiglu":  # fused [2F, D] weight: rows [0, F) gate, [F, 2F) up
            w = p[pre + "w_gate_up"]
            F_ = w.shape[0] // 2
            return (F.silu(h @ w[:F_].T) * (h @ w[F_:].T)) @ p[pre + "w_down"].T
        if c["mlp"] == "gelu":
            return F.gelu(h @ p[pre + "w_in"].T) @ p[pre + "w_out"].T
        return torch.zeros_like(h)

    def logits(self, ids):
        c, p = self.c, self.p
        x = p["embed.weight"][ids]
        if c.get("position", "none") == "learned":  # learned absolute positions, rows 0 .. T-1
            x = x + p["pos.weight"][: ids.shape[1]]
        post = c.get("norm_position", "pre") == "post"  # x = norm(x + f(x)), no final norm
        for l, kind in enumerate(c["layers"]):
            n1, n2 = f"layers.{l}.norm1", f"layers.{l}.norm2"
            if post:
                x = self.norm(x + self.attention(x, l, kind), n1)
                if c["mlp"] != "none":
                    x = self.norm(x + self.mlp(x, l), n2)
            else:
                x = x + self.attention(self.norm(x, n1), l, kind)
                if c["mlp"] != "none":
                    x = x + self.mlp(self.norm(x, n2), l)
        if not post:
            x = self.norm(x, "norm_f")
        head = p["embed.weight"] if c["tied_embeddings"] else p["head.weight"]
        return x @ head.T


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def lr_at(step, o):  # statebench's schedule (src/train/optimizer.cpp): warm-up, then cosine / linear / constant
    base, warm, total, floor = o["lr"], o["warmup_steps"], o["steps"], o["min_lr_ratio"]
    if step < warm:
        return base * (step + 1) / warm
    if o["schedule"] == "constant":
        return base
    span = total - 1 - warm
    p = 1.0 if span <= 0 else min(1.0, max(0.0, (step - warm) / span))
    mult = 1 - p if o["schedule"] == "linear" else 0.5 * (1 + math.cos(math.pi * p))
    return base * (floor + (1 - floor) * mult)


def main(fixture):
    cfg = json.load(open(os.path.join(fixture, "config.json")))
    params = {k: v.clone().requires_grad_(True) for k, v in load_npy_dir(os.path.join(fixture, "params")).items()}
    ids = torch.from_numpy(np.load(os.path.join(fixture, "input_ids.npy")).astype(np.int64))
    labels = torch.from_numpy(np.load(os.path.join(fixture, "labels.npy")).astype(np.int64))
    model = Model(cfg, params)
    logits = model.logits(ids)
    loss = loss_fn(logits, labels)
    loss.backward()
    out = os.path.join(fixture, "expected")
    save_npy(os.path.join(out, "logits.npy"), logits)
    save_npy(os.path.join(out, "loss.npy"), loss.reshape(1))
    for name, t in params.items():
        save_npy(os.path.join(out, "grads", name + ".npy"), t.grad)
    # AdamW steps on the same batch, statebench's optimiser semantics (torch.optim.AdamW).
    o = cfg["optim"]
    decay = set(cfg["decay"])
    groups = [{"params": [params[n] for n in params if n in decay], "weight_decay": o["weight_decay"]},
              {"params": [params[n] for n in params if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"])
    for step in range(o["steps"]):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, o)
        opt.zero_grad()
        loss = loss_fn(model.logits(ids), labels)
        loss.backward()
        if o["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), o["grad_clip"])
        opt.step()
        save_npy(os.path.join(out, "losses", f"step{step}.npy"), loss.detach().reshape(1))
    for name, t in params.items():
        save_npy(os.path.join(out, "after_adamw", name + ".npy"), t)
    print(f"{fixture}: loss {float(loss_fn(logits, labels)):.10f}, {len(params)} tensors, {o['steps']} AdamW steps")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: torch_reference.py FIXTURE_DIR [FIXTURE_DIR...]")
    for d in sys.argv[1:]:
        main(d)
