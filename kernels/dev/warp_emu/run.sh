#!/usr/bin/env bash
# run.sh CPU_BUILD_DIR [grid|small] [--tsan]: runs the short warp kernels (PaTH:
# kernels/attention/path/path_short_warp_sm80.cu, softmax: kernels/attention/softmax/
# softmax_short_warp_sm80.cu (fp32) and softmax_short_bf16_sm80.cu (bf16); building blocks in
# kernels/attention/common/short_warp_ops.cuh and bf16_warp_ops.cuh) on the CPU, a thread per lane (shim.hpp), against the double references nn::path_attention_* and
# nn::softmax_attention_* with the parity tests' tolerances (emu_main.cpp); with --tsan under
# ThreadSanitizer, where a missing barrier between lanes shows as a data race. Needs a CPU build's
# libsb_grad_f64.a and libsb_nn.a (the double reference: cmake --build CPU_BUILD_DIR --target
# sb_grad_f64). No GPU; the device compiler's code generation and the device's math functions are
# not what runs here.
set -euo pipefail
build=$(cd "$1" && pwd) mode=${2:-grid} tsan=${3:-}
here=$(cd "$(dirname "$0")" && pwd) src=$(cd "$here/../../.." && pwd)
out="$build/warp_emu" && mkdir -p "$out"
python3 - "$src" "$out/kernel_emu.inc" <<'PY'
import re, sys
src, dest = sys.argv[1], sys.argv[2]
ops = open(f'{src}/kernels/attention/common/short_warp_ops.cuh').read()
ops += open(f'{src}/kernels/attention/common/bf16_warp_ops.cuh').read()
ops = ops.replace('#pragma once', '').replace('#include <cuda_bf16.h>', '')
include = '#include "kernels/attention/common/short_warp_ops.cuh"'
def kernels(rel, cut):  # a kernel file up to its host code
    cu = open(f'{src}/{rel}').read()
    return cu[:cu.index(cut)]
body = ('#include "shim.hpp"\n' + ops  # emu_main.cpp goes on inside the last file's namespaces
        + kernels('kernels/attention/path/path_short_warp_sm80.cu', 'WarpArgs warp_args(').replace(include, '')
        + '}  // namespace\n}  // namespace sb::cuda::detail\n'
        + kernels('kernels/attention/softmax/softmax_short_warp_sm80.cu', 'SoftmaxShortArgs short_args(').replace(include, '')
        + '}  // namespace\n}  // namespace sb::cuda::detail\n'
        + kernels('kernels/attention/softmax/softmax_short_bf16_sm80.cu', 'Bf16ShortArgs bf16_short_args(')
          .replace(include, '').replace('#include "kernels/attention/common/bf16_warp_ops.cuh"', ''))
body = body.replace('extern __shared__ __align__(16) float s[];', 'float* s = emu::t_smem;')
while '__launch_bounds__(' in body:  # its argument list, nested parentheses and all
    i = body.index('__launch_bounds__('); j = i + len('__launch_bounds__('); depth = 1
    while depth:
        depth += {'(': 1, ')': -1}.get(body[j], 0); j += 1
    body = body[:i] + body[j:]
body = re.sub(r'asm\("cvt\.rna\.tf32.*?\);', 'r = emu::tf32_bits(x);', body, flags=re.S)
body = re.sub(r'asm volatile\(\s*"mma\.sync\.aligned\.m16n8k16.*?\);', 'emu::mma_bf16(d, a, b0, b1);', body, flags=re.S)
body = re.sub(r'asm volatile\(\s*"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans.*?\);', 'emu::ldsm_x4_trans(r, p);', body, flags=re.S)
body = re.sub(r'asm volatile\(\s*"cp\.async\.cg.*?\);', 'emu::cp_async16(dst, src, valid);', body, flags=re.S)
body = body.replace('asm volatile("cp.async.wait_all;\\n" ::: "memory");', '')
body = re.sub(r'asm volatile\(\s*"mma\.sync.*?\);', 'emu::mma_tf32(d, a, b);', body, flags=re.S)
body = re.sub(r'asm volatile\(\s*"ldmatrix.*?\);', 'emu::ldsm_x4(r, row);', body, flags=re.S)
body = body.replace('__global__ ', '').replace('__device__ ', '').replace('__forceinline__ ', 'inline ')
for left in ('__launch_bounds__', 'asm(', '__shared__'):
    assert left not in body, left
open(dest, 'w').write(body)
PY
flags=(-std=c++20 -fno-strict-aliasing -DSTATEBENCH_HAVE_CUDA=1 -DFMT_SHARED -I"$out" -I"$here" -I"$src" -I"$src/src"
       -I"$src/tests" -isystem /usr/local/cuda/include -isystem /usr/include/eigen3)
if [ "$tsan" = --tsan ]; then flags+=(-O1 -g -fsanitize=thread); else flags+=(-O2); fi
g++ "${flags[@]}" "$here/emu_main.cpp" "$build/src/libsb_grad_f64.a" "$build/src/libsb_nn.a" -lfmt -pthread -o "$out/emu"
"$out/emu" "$mode"
