#!/usr/bin/env bash
# stage.sh BUILD_DIR DEST: copies the prebuilt statebench and test_cuda_attention, their
# non-system shared libraries, run_device.sh and tools/sdpa_bench.py into DEST/{bin,tools} for a
# device call (the device machine has CUDA and PyTorch but not fmt / yaml-cpp).
set -euo pipefail
build=$1 dest=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dest" && mkdir -p "$dest/bin/lib" "$dest/tools"
cp "$build/statebench" "$build/tests/test_cuda_attention" "$src/kernels/dev/run_device.sh" "$dest/bin/"
cp "$src/tools/sdpa_bench.py" "$dest/tools/"
for lib in libfmt.so.9 libyaml-cpp.so.0.7 libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldd "$build/statebench" | awk -v l=$lib '$1 == l {print $3}')" "$dest/bin/lib/"
done
du -sh "$dest"
