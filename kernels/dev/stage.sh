#!/usr/bin/env bash
# stage.sh BUILD_DIR DEST.tgz: packs the prebuilt statebench and test_cuda_* binaries (built here
# with nvcc, no GPU), their non-system shared libraries, run_device.sh and tools/sdpa_bench.py into
# one xz archive (binaries stripped) for a device call's carry (the device machine has CUDA and
# PyTorch but not the fmt / yaml-cpp of this machine). Each binary is ~66 MB, mostly the same CUDA
# kernels: xz in one stream with a dictionary larger than all of them (384 MiB) stores those once
# (six binaries: 18.7 MB; with xz -9's 64 MiB window, shorter than one binary, 35.8 MB).
# On the device: mkdir -p stage && tar xf DEST.tgz -C stage && stage/bin/run_device.sh tests ...
# stage.sh BUILD_DIR DEST.tgz --statebench-only: statebench and its libraries alone, for sweep calls.
# stage.sh BUILD_DIR DEST.tgz --tests NAME[,NAME...]: the named test programs (and statebench if named),
# for parity calls.
set -euo pipefail
build=$1 dest=$2 only=${3:-} tests=${4:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin/lib" "$tmp/tools"
if [ "$only" = --statebench-only ]; then
  cp "$build/statebench" "$tmp/bin/"
elif [ "$only" = --tests ]; then
  for t in ${tests//,/ }; do  # statebench itself may be named too
    if [ "$t" = statebench ]; then cp "$build/statebench" "$tmp/bin/"; else cp "$build/tests/$t" "$tmp/bin/"; fi
  done
else
  cp "$build/statebench" "$build"/tests/test_cuda_* "$src/kernels/dev/run_device.sh" "$tmp/bin/"
fi
cp "$src/tools/sdpa_bench.py" "$tmp/tools/"
first=$( (ls "$tmp"/bin/statebench "$tmp"/bin/test_* 2>/dev/null || true) | head -1)
for lib in libfmt.so.9 libyaml-cpp.so.0.7; do  # not on the device (its libstdc++ is g++ 13's, newer than ours)
  path=$(ldd "$first" | awk -v l=$lib '$1 == l {print $3}')
  if [ -n "$path" ]; then cp -L "$path" "$tmp/bin/lib/"; fi
done
strip --strip-unneeded "$tmp"/bin/statebench "$tmp"/bin/test_* 2>/dev/null || true
mkdir -p "$(dirname "$dest")"
tar -I "xz -T1 --lzma2=preset=9e,dict=384MiB" -cf "$dest" -C "$tmp" .
du -sh "$dest"
