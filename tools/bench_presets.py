#!/usr/bin/env python3
"""bench_presets.py: the presets of `statebench bench train` for the PyTorch twin (torch_train_bench.py),
read from statebench itself (`statebench bench train --list-presets --json -`; the one table is
src/cli/bench_presets.cpp), with their model FLOPs per token (src/model/flops.cpp) and the device peak
table MFU divides by. Standard library only.
  python3 tools/bench_presets.py [--statebench build/statebench | --presets-json FILE]   # prints the table
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# torch_train_bench.py's argument names for the listing's model keys (same names unless given here).
SHAPE_KEYS = ("d_model", "n_layers", "n_heads", "head_dim", "mlp", "mlp_ratio", "norm", "tied", "rank", "block",
              "conv_bias", "beta_clamp", "rope_theta", "vocab", "T", "batch")


def load_presets(statebench=None, presets_json=None):
    """The listing as a dict: {"presets": [...], "peaks_tflops": [...]}. From presets_json (a file written by
    `statebench bench train --list-presets --json FILE`) if given, else by running statebench (default:
    build/statebench of this repository, then `statebench` on PATH)."""
    if presets_json:
        with open(presets_json) as f:
            return json.load(f)
    exe = statebench or os.path.join(ROOT, "build", "statebench")
    if not statebench and not os.path.exists(exe):
        exe = "statebench"
    try:
        out = subprocess.run([exe, "bench", "train", "--list-presets", "--json", "-"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"bench_presets: cannot list the presets with '{exe}' ({e}); build statebench or pass "
                 "--statebench PATH / --presets-json FILE")
    return json.loads(out)


def find_preset(listing, name):
    for p in listing["presets"]:
        if p["name"] == name:
            return p
    known = ", ".join(p["name"] for p in listing["presets"])
    sys.exit(f"--preset: unknown preset '{name}' (known: {known})")


def shape(preset):
    """The preset's model and data shape under torch_train_bench.py's argument names (head_dim 0 when it is
    d_model / n_heads, so that a --d-model or --n-heads override resolves it again)."""
    out = {key: preset[key] for key in SHAPE_KEYS}
    if out["head_dim"] == out["d_model"] // out["n_heads"]:
        out["head_dim"] = 0
    return out


def peak_tflops(listing, device_name, precision):
    """Dense peak TFLOP/s of the device at precision (bf16, tf32, fp32); None when unknown (first match wins)."""
    for row in listing["peaks_tflops"]:
        if row["match"] in device_name:
            value = row.get(precision, 0.0)
            return value if value > 0 else None
    return None


def format_table(rows):
    """Left-aligned columns two spaces apart (as statebench's tables)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [str(c).ljust(w) for c, w in zip(r, widths)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="Print statebench's bench train presets.")
    ap.add_argument("--statebench", help="the statebench binary (default build/statebench, then PATH)")
    ap.add_argument("--presets-json", help="a file from `statebench bench train --list-presets --json FILE`")
    a = ap.parse_args()
    listing = load_presets(a.statebench, a.presets_json)
    rows = [["preset", "B", "T", "V", "D", "layers", "heads", "mlp", "GFLOP/token path", "GFLOP/token rope"]]
    for p in listing["presets"]:
        rows.append([p["name"], p["batch"], p["T"], p["vocab"], p["d_model"], p["n_layers"], p["n_heads"],
                     f"{p['mlp']} {p['mlp_hidden']}", f"{p['flops_per_token']['path'] / 1e9:.4f}",
                     f"{p['flops_per_token']['rope'] / 1e9:.4f}"])
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
