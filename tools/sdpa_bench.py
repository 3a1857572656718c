#!/usr/bin/env python3
"""sdpa_bench.py: times PyTorch scaled_dot_product_attention (causal, bf16 by default) forward and
forward+backward with CUDA events (median of --reps after warm-up) on the shapes of
`statebench bench attention`, and reports its peak memory (torch.cuda.max_memory_allocated during
forward+backward, inputs and gradients included, as `peak MiB`). --json writes the numbers in the
form `statebench bench attention --sdpa FILE` reads.

Tensors are created as [B, H, T, Dh] (SDPA's native layout), random normal, requires_grad.
"""
import argparse
import json
import os
import sys

DEFAULT_SHAPES = ["8x2048x16x64", "4x4096x16x64", "2x8192x16x128", "128x256x8x64", "256x128x8x32", "64x512x4x64"]


def parse_shape(s):
    try:
        b, t, h, d = (int(x) for x in s.split("x"))
    except ValueError:
        sys.exit(f"sdpa_bench: bad shape '{s}' (expected BxTxHxDh)")
    return b, t, h, d


def median_ms(fn, reps, torch):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write results to this file")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from deps import need

    torch = need("sdpa_bench.py", "torch", min_torch="2.0")
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.exit("sdpa_bench: no CUDA device")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    dev = torch.device("cuda")
    results = []
    print(f"sdpa_bench: torch {torch.__version__} on {torch.cuda.get_device_name(0)}, {args.dtype}, median of {args.reps}")
    print(f"{'B,T,H,Dh':>16} {'fwd ms':>9} {'f+b ms':>9} {'fwd TF/s':>9} {'f+b TF/s':>9} {'peak MiB':>9}")
    for s in args.shapes:
        B, T, H, D = parse_shape(s)
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, T, D, device=dev, dtype=dtype)

        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def fwd_bwd():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(do)
            q.grad = k.grad = v.grad = None

        fwd_ms = median_ms(fwd, args.reps, torch)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(do)  # keeps q.grad etc. alive: peak with gradients, like our kernels' outputs
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del out
        q.grad = k.grad = v.grad = None
        fb_ms = median_ms(fwd_bwd, args.reps, torch)
        flops = 4.0 * B * H * D * T * (T + 1) / 2
        results.append({"B": B, "T": T, "H": H, "Dh": D, "fwd_ms": fwd_ms, "fwdbwd_ms": fb_ms,
                        "fwd_tflops": flops / fwd_ms * 1e-9, "fwdbwd_tflops": 3.5 * flops / fb_ms * 1e-9,
                        "peak_bytes": peak})
        print(f"{f'{B},{T},{H},{D}':>16} {fwd_ms:9.3f} {fb_ms:9.3f} {flops / fwd_ms * 1e-9:9.1f} "
              f"{3.5 * flops / fb_ms * 1e-9:9.1f} {peak / 2**20:9.0f}", flush=True)
        del q, k, v, do
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "sdpa", "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                       "dtype": args.dtype, "results": results}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
