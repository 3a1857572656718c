#!/usr/bin/env python3
"""check_export.py: load a model that `statebench export` wrote into the PyTorch reference model and
check that its logits match statebench's.

    statebench export RUN_DIR -o model.safetensors --check-data check.safetensors
    python3 tools/check_export.py model.safetensors check.safetensors     # needs torch (tools/README.md)
    python3 tools/check_export.py model.safetensors                       # list the file; no torch needed

The safetensors files are read with the standard library (8-byte header length, JSON header, raw
little-endian data; every header field is validated), so listing needs nothing else. The check
rebuilds the model with tools/torch_reference.py (float64, PaTH by explicit Householder products)
from the tensors and the "statebench.model" metadata, runs it on the check file's input_ids and
compares with the logits statebench's float64 CPU model computed from the same float32 parameters.
Exit status: 0 when the largest absolute difference is <= --tol (1e-5), 1 above it, 2 for a file
that is not what `statebench export` writes, 3 when PyTorch cannot be imported.
"""
import argparse
import json
import math
import os
import struct
import sys
from array import array

DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "I32": ("i", 4), "I64": ("q", 8)}


class FormatError(Exception):
    pass


def read_safetensors(path):
    """Returns (tensors, metadata): tensors maps name -> (dtype, shape, array of values in row-major order)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise FormatError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise FormatError(f"{path}: header length {n} exceeds the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: header is not JSON ({e})")
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise FormatError(f"{path}: __metadata__ is not a map of strings")
    body = data[8 + n:]
    tensors, spans = {}, []
    for name, entry in header.items():
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPES:
            raise FormatError(f"{path}: tensor {name!r} has dtype {dtype!r} (this reader knows {sorted(DTYPES)})")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise FormatError(f"{path}: tensor {name!r} has shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1] <= len(body)):
            raise FormatError(f"{path}: tensor {name!r} has data_offsets {offsets!r} (data: {len(body)} bytes)")
        code, size = DTYPES[dtype]
        if offsets[1] - offsets[0] != math.prod(shape) * size:
            raise FormatError(f"{path}: tensor {name!r}: {offsets[1] - offsets[0]} bytes for shape {shape} of {dtype}")
        values = array(code)
        values.frombytes(body[offsets[0]:offsets[1]])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (dtype, shape, values)
        spans.append(tuple(offsets))
    spans.sort()
    end = 0
    for begin, stop in spans:  # the data is covered exactly: no gap, no overlap
        if begin != end:
            raise FormatError(f"{path}: the tensors' data leaves a gap or overlaps at byte {end}")
        end = stop
    if end != len(body):
        raise FormatError(f"{path}: {len(body) - end} bytes after the last tensor")
    return tensors, metadata


def model_config(metadata, path):
    for key in ("statebench.model", "statebench.task"):
        if key not in metadata:
            raise FormatError(f"{path}: no {key!r} metadata (not written by `statebench export`)")
    return json.loads(metadata["statebench.model"]), json.loads(metadata["statebench.task"])


def describe(path, tensors, metadata):
    model, task = model_config(metadata, path)
    total = sum(math.prod(shape) for _, shape, _ in tensors.values())
    print(f"{path}: {len(tensors)} tensors, {total} parameters; step {metadata.get('statebench.step', '?')}, "
          f"statebench {metadata.get('statebench.version', '?')} ({metadata.get('statebench.commit', '?')})")
    print(f"  task {task['name']} {task['params']}: T={task['seq_len']} V={len(task['vocab'])}")
    print(f"  model: {model['n_layers']} layers {model['layers']}, d_model {model['d_model']}, "
          f"{model['n_heads']} heads of {model['head_dim']}, mlp {model['mlp']}, norm {model['norm']}")
    for name, (dtype, shape, _) in tensors.items():
        print(f"  {name:32s} {dtype} {shape}")


def check(model_path, tensors, metadata, check_path, tol):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from deps import need

    torch = need("check_export.py (the logits check)", "torch")
    need("check_export.py (the logits check)", "numpy")
    import torch_reference  # the independent float64 model (sets float64 as torch's default dtype)

    model_cfg, task = model_config(metadata, model_path)
    data, check_meta = read_safetensors(check_path)
    for name in ("input_ids", "logits"):
        if name not in data:
            raise FormatError(f"{check_path}: no {name!r} tensor (not written by `statebench export --check-data`)")

    def as_torch(entry, dtype):
        _, shape, values = entry
        return torch.tensor(values.tolist(), dtype=dtype).reshape(shape)

    params = {name: as_torch(entry, torch.float64) for name, entry in tensors.items()}
    ids = as_torch(data["input_ids"], torch.int64)
    expected = as_torch(data["logits"], torch.float64)
    V = model_cfg["vocab_size"]
    if ids.dim() != 2 or tuple(expected.shape) != (ids.shape[0], ids.shape[1], V):
        raise FormatError(f"{check_path}: logits {list(expected.shape)} do not fit input_ids {list(ids.shape)} and V={V}")
    with torch.no_grad():
        logits = torch_reference.Model(model_cfg, params).logits(ids)
    diff = (logits - expected).abs().max().item()
    scale = expected.abs().max().item()
    agree = (logits.argmax(-1) == expected.argmax(-1)).double().mean().item()
    ok = diff <= tol
    print(f"{check_path}: {ids.shape[0]} examples of length {ids.shape[1]} "
          f"({check_meta.get('statebench.split', '?')} split): max |PyTorch - statebench| = {diff:.3e} "
          f"(logits up to {scale:.3g}; argmax agrees at {100 * agree:.1f}% of positions): "
          f"{'OK' if ok else 'MISMATCH'} at tolerance {tol:g}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the .safetensors file `statebench export -o` wrote")
    ap.add_argument("check", nargs="?", help="the file `statebench export --check-data` wrote")
    ap.add_argument("--tol", type=float, default=1e-5, help="largest allowed absolute logit difference (1e-5)")
    args = ap.parse_args()
    try:
        tensors, metadata = read_safetensors(args.model)
        if args.check is None:
            describe(args.model, tensors, metadata)
            return 0
        return check(args.model, tensors, metadata, args.check, args.tol)
    except (FormatError, OSError, KeyError, ValueError) as e:
        print(f"check_export.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
