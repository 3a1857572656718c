#!/usr/bin/env bash
# stage.sh BUILD_DIR DEST.tgz: packs the prebuilt statebench and test_cuda_* binaries (built here
# with nvcc, no GPU), their non-system shared libraries, run_device.sh and tools/sdpa_bench.py into
# one xz archive (binaries stripped) for a device call's carry (the device machine has CUDA and
# PyTorch but not the fmt / yaml-cpp of this machine; the binaries are ~100 MB, the archive ~35 MB,
# the carry limit 64 MiB with the tracked tree's ~25 MB; gzip no longer fit).
# On the device: mkdir -p stage && tar xf DEST.tgz -C stage && stage/bin/run_device.sh tests ...
# stage.sh BUILD_DIR DEST.tgz --statebench-only: statebench and its libraries alone (~8 MB), for
# sweep calls whose tracked tree (results/) leaves too little of the carry limit for the tests.
set -euo pipefail
build=$1 dest=$2 only=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin/lib" "$tmp/tools"
if [ "$only" = --statebench-only ]; then
  cp "$build/statebench" "$tmp/bin/"
else
  cp "$build/statebench" "$build"/tests/test_cuda_attention "$build"/tests/test_cuda_ops "$build"/tests/test_cuda_model \
    "$src/kernels/dev/run_device.sh" "$tmp/bin/"
fi
cp "$src/tools/sdpa_bench.py" "$tmp/tools/"
for lib in libfmt.so.9 libyaml-cpp.so.0.7 libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldd "$build/statebench" | awk -v l=$lib '$1 == l {print $3}')" "$tmp/bin/lib/"
done
strip --strip-unneeded "$tmp"/bin/statebench "$tmp"/bin/test_cuda_* 2>/dev/null || true
mkdir -p "$(dirname "$dest")"
tar cJf "$dest" -C "$tmp" .
du -sh "$dest"
