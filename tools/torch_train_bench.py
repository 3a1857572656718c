#!/usr/bin/env python3
"""torch_train_bench.py: times full training steps of statebench's model in PyTorch (the baseline for
`statebench bench train`): forward, cross-entropy over every position, backward, gradient clipping,
torch.optim.AdamW step. Same architecture, parameter names, shapes and init as src/model/ (pre-norm
decoder; PaTH / PaTH-FoX via tools/torch_path_blockwise.py, RoPE / NoPE / FoX softmax attention,
stick-breaking attention by dense log-space scores).
Presets come from statebench (`bench train --list-presets --json`, via tools/bench_presets.py), so both
time the same models; with a preset the rows carry MFU by statebench's FLOP count (docs/benchmarks.md).
Prints one JSON line and one human line per attention kind, then a table. PyTorch 1.13 (Debian) and 2.x.
  python3 tools/torch_train_bench.py --preset flipflop_ref --threads 2
  python3 tools/torch_train_bench.py --preset a5_l32 --attention path,rope --device cuda --dtype bf16 --mode compile
  python3 tools/torch_train_bench.py --check   # float64 model vs tools/torch_reference.py
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

# libgomp reads this when torch loads: sleeping (not spinning) idle OpenMP threads keep a 2-core box
# shared with other work from stalling every parallel op (see tools/README.md). Set it to override.
OMP_WAIT_POLICY = os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deps import need  # noqa: E402

torch = need("torch_train_bench.py", "torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bench_presets  # noqa: E402
from torch_path_blockwise import path_attention_blockwise  # noqa: E402

# Defaults of the shape flags when neither a preset nor a flag sets them.
DEFAULTS = dict(attention="path", d_model=64, n_layers=1, n_heads=2, head_dim=0, mlp="swiglu", mlp_ratio=4.0,
                norm="rmsnorm", tied=False, rank=32, block=32, conv_bias=False, beta_clamp=0.0, rope_theta=10000.0,
                vocab=5, T=512, batch=16)
KINDS = ("path", "rope", "nope", "fox", "path_fox", "sba")

RMS_EPS, LN_EPS, W_EPS = 1e-6, 1e-5, 1e-6  # statebench: rmsnorm 1e-6, layernorm 1e-5, w l2norm 1e-6 (in the sqrt)


def uses_path(kind):
    return kind in ("path", "path_fox")


def uses_gate(kind):
    return kind in ("fox", "path_fox")


# ---- the model (parameter names = statebench's ParamStore names, docs/model.md) ----

class Holder(nn.Module):
    """A module that only holds named parameters (keeps statebench's dotted names)."""

    def __init__(self, **shapes):
        super().__init__()
        for name, shape in shapes.items():
            setattr(self, name, nn.Parameter(torch.zeros(*shape)))


class Norm(nn.Module):
    def __init__(self, D, kind):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(D))
        if kind == "layernorm":
            self.bias = nn.Parameter(torch.zeros(D))

    def forward(self, x):
        if self.kind == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


def rope(x, theta):  # x [B, T, H, Dh]; half-split (rotate_half), positions from 0
    T, Dh = x.shape[1], x.shape[3]
    half = Dh // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64, device=x.device) * 2.0 / Dh)
    ang = torch.arange(T, dtype=torch.float64, device=x.device)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype)[None, :, None, :], ang.sin().to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def upcast(x):
    """bf16 / fp16 -> fp32; fp32 and fp64 unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def softmax_attention(q, k, v, log_f, use_sdpa):
    """Causal (FoX-gated when log_f is given) softmax attention; q, k, v [B, T, H, Dh] -> [B, T, H, Dh]."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, Dh]
    T = q.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    bias = None
    if log_f is not None:
        c = upcast(log_f).transpose(1, 2).cumsum(-1)  # [B, H, T]
        bias = (c[..., :, None] - c[..., None, :]).masked_fill(~causal, float("-inf"))
    if use_sdpa:
        if bias is None:
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias.to(qt.dtype))
    else:
        s = upcast(qt @ kt.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        s = s + bias if bias is not None else s.masked_fill(~causal, float("-inf"))
        o = s.softmax(-1).to(vt.dtype) @ vt
    return o.transpose(1, 2)


def sba_attention(q, k, v, remainder):
    """Stick-breaking attention (docs/attention.md), dense [T, T] log-space weights in fp32 or better."""
    T = q.shape[1]
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, Dh]
    z = upcast(qt @ kt.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    strict = torch.ones(T, T, dtype=torch.bool, device=q.device).tril(-1)  # keys j < i
    log_keep = F.logsigmoid(-z).masked_fill(~strict, 0.0)
    after = log_keep.flip(-1).cumsum(-1).flip(-1) - log_keep  # sum over the keys after j
    att = (F.logsigmoid(z) + after).masked_fill(~strict, float("-inf")).exp()
    o = att.to(vt.dtype) @ vt
    if remainder:
        o = o + log_keep.sum(-1).exp().to(vt.dtype)[..., None] * vt
    return o.transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, a, kind):
        super().__init__()
        D, H, Dh = a.d_model, a.n_heads, a.head_dim
        HD = H * Dh
        self.kind, self.H, self.Dh, self.a = kind, H, Dh, a
        self.wq = nn.Parameter(torch.zeros(HD, D))
        self.wk = nn.Parameter(torch.zeros(HD, D))
        self.wv = nn.Parameter(torch.zeros(HD, D))
        self.wo = nn.Parameter(torch.zeros(D, HD))
        if uses_gate(kind):
            self.wf = nn.Parameter(torch.zeros(H, D))
            self.bf = nn.Parameter(torch.zeros(H))
        if uses_path(kind):
            self.w1 = nn.Parameter(torch.zeros(a.rank, D))
            self.w2 = nn.Parameter(torch.zeros(HD, a.rank))
            self.conv = nn.Parameter(torch.zeros(HD, 3))
            self.conv_bias = nn.Parameter(torch.zeros(HD)) if a.conv_bias else None
            self.wbeta = nn.Parameter(torch.zeros(H, D))
            self.bbeta = nn.Parameter(torch.zeros(H))

    def w_and_beta(self, h):
        """PaTH's w [B, T, H, Dh] and beta [B, T, H], always in fp32 or better (autocast off)."""
        B, T, _ = h.shape
        dt = torch.float64 if h.dtype == torch.float64 else torch.float32
        with torch.autocast(device_type=h.device.type, enabled=False):
            h = h.to(dt)
            u = F.linear(F.linear(h, self.w1.to(dt)), self.w2.to(dt))  # [B, T, HD]
            C = u.shape[-1]
            bias = None if self.conv_bias is None else self.conv_bias.to(dt)
            y = F.conv1d(F.pad(u.transpose(1, 2), (2, 0)), self.conv.to(dt).view(C, 1, 3), bias, groups=C)
            y = F.silu(y.transpose(1, 2)).reshape(B, T, self.H, self.Dh)
            w = y / torch.sqrt((y * y).sum(-1, keepdim=True) + W_EPS)
            beta = 2.0 * torch.sigmoid(F.linear(h, self.wbeta.to(dt), self.bbeta.to(dt)))
            if self.a.beta_clamp > 0:
                beta = beta.clamp(max=self.a.beta_clamp)
        return w, beta

    def forward(self, h):
        B, T, _ = h.shape
        H, Dh = self.H, self.Dh
        q = F.linear(h, self.wq).view(B, T, H, Dh)
        k = F.linear(h, self.wk).view(B, T, H, Dh)
        v = F.linear(h, self.wv).view(B, T, H, Dh)
        log_f = None
        if uses_gate(self.kind):
            with torch.autocast(device_type=h.device.type, enabled=False):
                dt = torch.float64 if h.dtype == torch.float64 else torch.float32
                log_f = F.logsigmoid(F.linear(h.to(dt), self.wf.to(dt), self.bf.to(dt)))
        if self.kind == "rope":
            q, k = rope(q, self.a.rope_theta), rope(k, self.a.rope_theta)
        if uses_path(self.kind):
            w, beta = self.w_and_beta(h)
            o = path_attention_blockwise(q, k, v, w, beta, log_f, block=self.a.block, scores=self.a.path_scores)
        elif self.kind == "sba":
            o = sba_attention(q, k, v, self.a.sba_remainder == "current")
        else:
            o = softmax_attention(q, k, v, log_f, self.a.sdpa)
        return F.linear(o.reshape(B, T, H * Dh), self.wo)


class Mlp(nn.Module):
    def __init__(self, a):
        super().__init__()
        D, Fh = a.d_model, a.mlp_hidden
        self.kind, self.Fh = a.mlp, Fh
        if a.mlp == "swiglu":
            self.w_gate_up = nn.Parameter(torch.zeros(2 * Fh, D))  # rows [0, F) gate, [F, 2F) up
            self.w_down = nn.Parameter(torch.zeros(D, Fh))
        else:
            self.w_in = nn.Parameter(torch.zeros(Fh, D))
            self.w_out = nn.Parameter(torch.zeros(D, Fh))

    def forward(self, h):
        if self.kind == "swiglu":
            gate, up = F.linear(h, self.w_gate_up).split(self.Fh, dim=-1)
            return F.linear(F.silu(gate) * up, self.w_down)
        return F.linear(F.gelu(F.linear(h, self.w_in)), self.w_out)  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, a, kind):
        super().__init__()
        self.norm1 = Norm(a.d_model, a.norm)
        self.attn = Attention(a, kind)
        if a.mlp != "none":
            self.norm2 = Norm(a.d_model, a.norm)
            self.mlp = Mlp(a)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        if hasattr(self, "mlp"):
            x = x + self.mlp(self.norm2(x))
        return x


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.embed = Holder(weight=(a.vocab, a.d_model))
        self.layers = nn.ModuleList(Block(a, kind) for kind in a.layer_kinds)
        self.norm_f = Norm(a.d_model, a.norm)
        if not a.tied:
            self.head = Holder(weight=(a.vocab, a.d_model))

    def forward(self, ids):  # ids [B, T] -> logits [B, T, V]
        x = F.embedding(ids, self.embed.weight)
        for layer in self.layers:
            x = layer(x)
        head = self.embed.weight if self.a.tied else self.head.weight
        return F.linear(self.norm_f(x), head)

    def init_params(self, seed, std=0.02):
        """statebench's scheme (transformer.cpp init_params, 'scaled'); the random streams differ."""
        gen = torch.Generator().manual_seed(seed)
        out_std = std / math.sqrt(2.0 * len(self.layers))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0 if name.endswith(".weight") else 0.0)  # norm gains 1; biases 0 (f = 0.5, beta = 1)
                elif name.endswith("attn.conv"):
                    b = 1.0 / math.sqrt(3.0)
                    p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 * b - b)
                else:
                    sd = out_std if name.endswith(("attn.wo", "mlp.w_down", "mlp.w_out")) else std
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * sd)

    def decay_flags(self):
        """statebench's weight-decay flags: matrices yes (not the conv kernel), vectors no."""
        return {n: p.dim() == 2 and not n.endswith("attn.conv") for n, p in self.named_parameters()}


# ---- arguments ----

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Time statebench's model's training step in PyTorch.")
    ap.add_argument("--preset", help="a `statebench bench train` preset (explicit flags override it): flipflop_ref, "
                    "wordproblem_128, a5_l32, merrill_a5, mqrar, mqar")
    ap.add_argument("--statebench", help="the statebench binary that lists the presets (default build/statebench)")
    ap.add_argument("--presets-json", help="the presets from `statebench bench train --list-presets --json FILE`")
    ap.add_argument("--attention", help="attention kinds, comma-separated (each timed in turn): " + ", ".join(KINDS))
    ap.add_argument("--layers", help="comma-separated attention kind per layer (hybrids), overrides --attention")
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--n-layers", type=int)
    ap.add_argument("--n-heads", type=int)
    ap.add_argument("--head-dim", type=int, help="default d_model / n_heads")
    ap.add_argument("--mlp", choices=["swiglu", "gelu", "none"])
    ap.add_argument("--mlp-ratio", type=float)
    ap.add_argument("--norm", choices=["rmsnorm", "layernorm"])
    ap.add_argument("--tied", action="store_true", default=None, help="tie the output head to the embedding")
    ap.add_argument("--rank", type=int, help="PaTH w low rank (model.path.rank)")
    ap.add_argument("--block", type=int, help="PaTH block size (model.path.block)")
    ap.add_argument("--conv-bias", action="store_true", default=None)
    ap.add_argument("--beta-clamp", type=float)
    ap.add_argument("--rope-theta", type=float)
    ap.add_argument("--sba-remainder", choices=["current", "none"], default="current",
                    help="stick-breaking: what the left-over stick weights (model.sba.remainder)")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--T", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0 = leave")
    ap.add_argument("--dtype", choices=["fp32", "tf32", "bf16"], default="fp32",
                    help="bf16: autocast (fp32 master weights); tf32: fp32 with TF32 matmuls (cuda)")
    ap.add_argument("--path-scores", choices=["fp32", "autocast"], default="fp32",
                    help="PaTH logits in fp32 (default) or following autocast")
    ap.add_argument("--no-sdpa", dest="sdpa", action="store_false",
                    help="softmax attention by explicit scores instead of F.scaled_dot_product_attention")
    ap.add_argument("--mode", choices=["eager", "compile"], help="eager (the default) or torch.compile (PyTorch 2.x)")
    ap.add_argument("--compile", action="store_true", help="= --mode compile")
    ap.add_argument("--eager", action="store_true", help="= --mode eager")
    ap.add_argument("--adamw", choices=["default", "foreach", "fused"], default="default",
                    help="torch.optim.AdamW implementation (foreach/fused: PyTorch 2.x)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0 = off (statebench's default is 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="float64 model vs tools/torch_reference.py, then exit")
    a = ap.parse_args(argv)
    if a.layers and a.n_layers is None:
        a.n_layers = len(a.layers.split(","))
    a.listing, a.preset_info = None, None
    if a.preset:
        a.listing = bench_presets.load_presets(a.statebench, a.presets_json)
        a.preset_info = bench_presets.find_preset(a.listing, a.preset)
    base = dict(DEFAULTS, **(bench_presets.shape(a.preset_info) if a.preset_info else {}))
    for key, value in base.items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.eager and a.compile or a.mode and (a.eager or a.compile):
        ap.error("give one of --mode, --eager and --compile")
    a.compile = a.compile or a.mode == "compile"
    a.mode = "compile" if a.compile else "eager"
    a.head_dim = a.head_dim or a.d_model // a.n_heads
    a.mlp_hidden = max(1, math.floor(a.mlp_ratio * a.d_model + 0.5))  # C++ round(): halves away from 0
    a.kinds = a.attention.split(",")
    for kind in a.kinds:
        if kind not in KINDS:
            ap.error(f"--attention: unknown attention kind '{kind}' ({', '.join(KINDS)})")
    if a.layers and len(a.kinds) > 1:
        ap.error("--layers takes one --attention kind")
    a.attention = a.kinds[0]
    a.layer_kinds = a.layers.split(",") if a.layers else [a.attention] * a.n_layers
    if len(a.layer_kinds) != a.n_layers:
        ap.error(f"--layers names {len(a.layer_kinds)} kinds for --n-layers {a.n_layers}")
    for kind in a.layer_kinds:
        if kind not in ("path", "rope", "nope", "fox", "path_fox", "sba"):
            ap.error(f"--layers: unknown attention '{kind}' (path, rope, nope, fox, path_fox, sba)")
    if a.sdpa and not hasattr(F, "scaled_dot_product_attention"):
        a.sdpa = False  # PyTorch 1.x
    return a


# ---- the benchmark ----

def device_name(dev, threads):
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    model = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"cpu ({threads} threads, {model})"


def blas_libraries():
    """The BLAS / LAPACK shared objects this process has mapped (Debian's torch: whatever libblas.so.3 is)."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if ("blas" in path or "mkl" in path) and path not in found:
                    found.append(os.path.realpath(path))
    except OSError:
        pass
    return sorted(set(found))


def preset_flops_per_token(a):
    """statebench's model FLOPs per token of the preset's model (src/model/flops.cpp, with the task's labelled
    fraction), when the shape is the preset's with one attention kind throughout; else None."""
    p = a.preset_info
    if p is None or len(set(a.layer_kinds)) != 1:
        return None
    if any(getattr(a, key) != p[key] for key in bench_presets.SHAPE_KEYS if key not in ("batch", "tied", "norm")):
        return None
    return p["flops_per_token"][a.layer_kinds[0]]


def bench(a):
    dev = torch.device(a.device)
    if dev.type == "cpu" and a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.dtype == "bf16" and dev.type != "cuda":
        print("note: bf16 autocast on the CPU", file=sys.stderr)
    if dev.type == "cuda":  # the public switch in 1.12+ and 2.x ("high" = TF32 matmuls)
        torch.set_float32_matmul_precision("high" if a.dtype == "tf32" else "highest")
    torch.manual_seed(a.seed)
    model = Model(a)
    model.init_params(a.seed)
    model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    flags = model.decay_flags()
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if flags[n]], "weight_decay": a.weight_decay},
              {"params": [p for n, p in named if not flags[n]], "weight_decay": 0.0}]
    kw = {"foreach": True} if a.adamw == "foreach" else {"fused": True} if a.adamw == "fused" else {}
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, **kw)
    forward = torch.compile(model) if a.compile else model
    gen = torch.Generator().manual_seed(a.seed)
    batches = [(torch.randint(0, a.vocab, (a.batch, a.T), generator=gen).to(dev),
                torch.randint(0, a.vocab, (a.batch, a.T), generator=gen).to(dev)) for _ in range(4)]
    use_autocast = a.dtype == "bf16"

    def step(i):
        ids, labels = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_autocast):
            logits = forward(ids)
        loss = F.cross_entropy(upcast(logits).reshape(-1, a.vocab), labels.reshape(-1))
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        return loss.detach()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    load_before = os.getloadavg()
    for i in range(a.warmup):
        step(i)
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.steps)]
    times_ms, loss = [], None
    wall0 = time.perf_counter()
    for i in range(a.steps):
        if dev.type == "cuda":
            events[i][0].record()
            loss = step(a.warmup + i)
            events[i][1].record()
        else:
            t0 = time.perf_counter()
            loss = step(a.warmup + i)
            times_ms.append(1e3 * (time.perf_counter() - t0))
    sync()
    wall_s = time.perf_counter() - wall0
    if dev.type == "cuda":
        times_ms = [s.elapsed_time(e) for s, e in events]
    load_after = os.getloadavg()
    mean_ms = statistics.fmean(times_ms)
    tokens = a.batch * a.T
    threads = torch.get_num_threads()
    result = {
        "bench": "torch_train", "preset": a.preset, "layers": a.layer_kinds, "d_model": a.d_model,
        "n_layers": a.n_layers, "n_heads": a.n_heads, "head_dim": a.head_dim, "mlp": a.mlp, "mlp_ratio": a.mlp_ratio,
        "mlp_hidden": a.mlp_hidden, "norm": a.norm, "tied": a.tied, "rank": a.rank, "block": a.block, "vocab": a.vocab,
        "T": a.T, "batch": a.batch, "params": n_params, "device": device_name(dev, threads),
        "threads": threads if dev.type == "cpu" else None, "dtype": a.dtype, "path_scores": a.path_scores,
        "sdpa": a.sdpa, "compile": a.compile, "adamw": a.adamw, "grad_clip": a.grad_clip, "warmup": a.warmup,
        "steps": a.steps, "ms_per_step": mean_ms, "ms_per_step_median": statistics.median(times_ms),
        "ms_per_step_min": min(times_ms), "tokens_per_s": tokens / (mean_ms / 1e3), "wall_s": wall_s,
        "final_loss": float(loss), "torch": torch.__version__, "python": platform.python_version(),
        "blas": blas_libraries(), "omp_wait_policy": OMP_WAIT_POLICY,
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
    }
    if dev.type == "cuda":
        result["peak_memory_mib"] = torch.cuda.max_memory_allocated(dev) / 2**20
    flops = preset_flops_per_token(a)
    peak = bench_presets.peak_tflops(a.listing, result["device"], a.dtype) if flops and dev.type == "cuda" else None
    result["mode"] = a.mode
    result["flops_per_token"] = flops
    result["tflops"] = result["tokens_per_s"] * flops / 1e12 if flops else None
    result["mfu"] = result["tflops"] / peak if peak else None
    print(json.dumps(result))
    print(f"torch_train_bench {a.preset or 'custom'}: {','.join(a.layer_kinds)} D={a.d_model} L={a.n_layers} "
          f"H={a.n_heads} Dh={a.head_dim} {a.mlp} V={a.vocab} T={a.T} B={a.batch}, {n_params} params | "
          f"{result['tokens_per_s']:.0f} tokens/s, {mean_ms:.2f} ms/step (median {result['ms_per_step_median']:.2f}) "
          f"over {a.steps} steps on {result['device']}, {a.dtype}{', compiled' if a.compile else ''}; "
          f"loadavg {load_before[0]:.2f} -> {load_after[0]:.2f}")
    return result


def main():
    a = parse_args()
    if a.check:
        import torch_train_check  # noqa: E402 (the self-check lives beside this file)
        return 0 if torch_train_check.check(sys.modules[__name__]) else 1
    rows = [["preset", "attention", "mode", "B", "T", "params", "steps", "ms/step", "tokens/s", "TFLOP/s", "MFU"]]
    for kind in a.kinds:
        a.attention = kind
        if not a.layers:
            a.layer_kinds = [kind] * a.n_layers
        r = bench(a)
        rows.append([a.preset or "custom", ",".join(sorted(set(a.layer_kinds))), a.mode, a.batch, a.T, r["params"],
                     a.steps, f"{r['ms_per_step']:.2f}", f"{r['tokens_per_s']:.0f}",
                     f"{r['tflops']:.2f}" if r["tflops"] is not None else "-",
                     f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"])
    print(bench_presets.format_table(rows))
    print(f"device: {r['device']} ({a.dtype}, {a.mode}); torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
