// elementwise.cu: CUDA kernels for the dense per-token ops of the model (embedding, bias, scale,
// row gathers and expansions) and the fixed-order column sums that the parameter gradients
// share (kernels/ops/launch.cuh); norms are in kernels/ops/norm.cu, activations and SwiGLU in kernels/ops/act.cu, RoPE
// in kernels/ops/rope.cu, the PaTH w path and beta in kernels/ops/path_wpath.cu. Declarations: kernels/ops/ops.hpp.
// Parameter gradients are reduced over rows with fixed-order column sums (no atomics), so every
// result is deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace ops_detail {
int64_t reduce_chunks(int64_t N, int64_t cols, ReduceScratch scratch) {
  if (!scratch.data) return 1;
  return std::max<int64_t>(1, std::min<int64_t>({kReduceChunks, N / 512, scratch.floats / cols}));
}

// ---- column sums (parameter gradients of norms, biases and narrow products) ----------------------
namespace {
// sum_n term(n, d) over the rows of chunk blockIdx.y; mode 0: a[n, d]; 1: a[n, d] * b[n, d] * r[n];
// 2: a[n, d] * (b[n, d] - mu[n]) * r[n]; 3 (d = o I + i, a [N, I], b [N, D / I]): a[n, i] * b[n, o].
// Block (32, 16): columns x rows, fixed reduction order. partial == nullptr (one chunk): out[d] +=
// sum; else partial[chunk, d] = sum. a: fp32, or bf16 (a norm's bf16 dout).
template <class A>
__global__ void colsum_kernel(float* out, float* partial, const A* a, const float* b, const float* mu, const float* r,
                              int64_t N, int64_t D, int64_t I, int64_t rows_per_chunk, int mode) {
  __shared__ float part[16][33];
  const int64_t d = blockIdx.x * 32 + threadIdx.x;
  const int64_t n0 = blockIdx.y * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  float acc = 0.f;
  if (d < D && mode == 3) {
    const int64_t O = D / I;
    const A* ai = a + d % I;
    const float* bo = b + d / I;
    for (int64_t n = n0 + threadIdx.y; n < n1; n += 16) acc += to_float(ai[n * I]) * bo[n * O];
  } else if (d < D)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += 16) {
      const float x = to_float(a[n * D + d]);
      if (mode == 0)
        acc += x;
      else if (mode == 1)
        acc += x * b[n * D + d] * r[n];
      else
        acc += x * ((b[n * D + d] - mu[n]) * r[n]);
    }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    float s = 0.f;
    for (int i = 0; i < 16; ++i) s += part[i][threadIdx.x];
    if (partial)
      partial[blockIdx.y * D + d] = s;
    else
      out[d] += s;
  }
}

// out[d] += sum over chunks c of partial[c, d]. Block (32, 32): columns x chunk lanes; lane y sums
// chunks y, y + 32, ... (coalesced over the columns), then the 32 lane sums are added in lane order:
// a fixed order, and 32 times fewer dependent loads than one thread per column (the norms' fused
// sums have up to 1024 chunks). Blocks from blocks_a on take the second sum (out2, partial2, D2).
__global__ void chunk_sum_kernel(float* out, const float* partial, int64_t chunks, int64_t D, unsigned blocks_a,
                                 float* out2, const float* partial2, int64_t D2) {
  __shared__ float part[32][33];
  const bool second = blockIdx.x >= blocks_a;
  if (second) out = out2, partial = partial2, D = D2;
  const int64_t d = (blockIdx.x - (second ? blocks_a : 0)) * 32 + threadIdx.x;
  float s = 0.f;
  if (d < D)
#pragma unroll 8
    for (int64_t c = threadIdx.y; c < chunks; c += 32) s += partial[c * D + d];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    float t = 0.f;
    for (int i = 0; i < 32; ++i) t += part[i][threadIdx.x];
    out[d] += t;
  }
}
}  // namespace

void chunk_sum(float* out, const float* partial, int64_t chunks, int64_t D, cudaStream_t stream, float* out2,
               const float* partial2, int64_t D2) {
  const unsigned blocks_a = blocks_for(D, 32), blocks_b = out2 ? blocks_for(D2, 32) : 0;
  chunk_sum_kernel<<<blocks_a + blocks_b, dim3(32, 32), 0, stream>>>(out, partial, chunks, D, blocks_a, out2, partial2,
                                                                     D2);
  SB_CUDA_CHECK_LAUNCH();
}

template <class A>
void colsum_of(float* out, const A* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D, int mode,
               cudaStream_t stream, ReduceScratch scratch, int64_t I) {
  if (N <= 0 || D <= 0) return;
  const int64_t chunks = reduce_chunks(N, D, scratch), rows = (N + chunks - 1) / chunks;
  float* partial = chunks > 1 ? scratch.data : nullptr;
  colsum_kernel<<<dim3(blocks_for(D, 32), static_cast<unsigned>(chunks)), dim3(32, 16), 0, stream>>>(
      out, partial, a, b, mu, r, N, D, I, rows, mode);
  SB_CUDA_CHECK_LAUNCH();
  if (partial) chunk_sum(out, partial, chunks, D, stream);
}

void colsum(float* out, const float* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D, int mode,
            cudaStream_t stream, ReduceScratch scratch, int64_t I) {
  colsum_of(out, a, b, mu, r, N, D, mode, stream, scratch, I);
}
void colsum(float* out, const uint16_t* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D,
            int mode, cudaStream_t stream, ReduceScratch scratch, int64_t I) {
  colsum_of(out, a, b, mu, r, N, D, mode, stream, scratch, I);
}
}  // namespace ops_detail

namespace {

using namespace ops_detail;

// ---- embedding ---------------------------------------------------------------------------------
__global__ void embedding_forward_kernel(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t D) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * D) out[i] = wte[static_cast<int64_t>(ids[i / D]) * D + i % D];
}
// Four columns per thread (D % 4 == 0, out and wte 16-byte aligned; D4 = D / 4, 32-bit indices).
__global__ void embedding_forward4_kernel(float4* out, const int32_t* ids, const float4* wte, uint32_t n4,
                                          uint32_t D4) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) out[i] = wte[static_cast<int64_t>(ids[i / D4]) * D4 + i % D4];
}

// Embedding gradient (layout in kernels/ops/ops.hpp). One CTA of kEmbWarps warps per segment: warp w sums
// rows w, w + kEmbWarps, ... of the segment (4 rows in flight), the warps' sums are added in order.
constexpr int kEmbWarps = 8, kEmbCols = 256;
// The shortest segment: 64 rows (8 a warp) keeps a frequent token's rows over many CTAs (a batch of
// 32768 tokens over ~64 ids: ~512 CTAs, a few per SM) while each warp still has two 4-row steps.
constexpr int64_t kEmbMinRows = 64;
struct EmbIndex {
  const int32_t *seg_id, *seg_begin, *seg_slot, *order, *multi_id, *multi_slot0;
  __device__ EmbIndex(const int32_t* index, int64_t N)
      : seg_id(index + 2), seg_begin(index + 2 + N), seg_slot(index + 3 + 2 * N), order(index + 3 + 3 * N),
        multi_id(index + 3 + 4 * N), multi_slot0(index + 3 + 5 * N) {}
};

__global__ void embedding_segments_kernel(float* dwte, float* slots, const float* dout, const int32_t* index, int64_t N,
                                          int64_t D) {
  __shared__ float part[kEmbWarps][kEmbCols];
  const EmbIndex ix(index, N);
  const int nseg = index[0], warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int sgi = blockIdx.x; sgi < nseg; sgi += gridDim.x) {
    const int b = ix.seg_begin[sgi], e = ix.seg_begin[sgi + 1], slot = ix.seg_slot[sgi];
    float* dst = slot < 0 ? dwte + static_cast<int64_t>(ix.seg_id[sgi]) * D : slots + static_cast<int64_t>(slot) * D;
    for (int64_t c0 = 0; c0 < D; c0 += kEmbCols) {
      const int cols = static_cast<int>(min(D - c0, static_cast<int64_t>(kEmbCols)));
      float acc[kEmbCols / 32];
#pragma unroll
      for (int j = 0; j < kEmbCols / 32; ++j) acc[j] = 0.f;
      int i = b + warp;
      for (; i + 3 * kEmbWarps < e; i += 4 * kEmbWarps) {  // 4 rows per step: 4 loads per column in flight
        const float* r0 = dout + static_cast<int64_t>(ix.order[i]) * D + c0;
        const float* r1 = dout + static_cast<int64_t>(ix.order[i + kEmbWarps]) * D + c0;
        const float* r2 = dout + static_cast<int64_t>(ix.order[i + 2 * kEmbWarps]) * D + c0;
        const float* r3 = dout + static_cast<int64_t>(ix.order[i + 3 * kEmbWarps]) * D + c0;
#pragma unroll
        for (int j = 0; j < kEmbCols / 32; ++j) {
          const int d = lane + 32 * j;
          if (d < cols) acc[j] += ((r0[d] + r1[d]) + r2[d]) + r3[d];
        }
      }
      for (; i < e; i += kEmbWarps) {
        const float* r0 = dout + static_cast<int64_t>(ix.order[i]) * D + c0;
#pragma unroll
        for (int j = 0; j < kEmbCols / 32; ++j) {
          const int d = lane + 32 * j;
          if (d < cols) acc[j] += r0[d];
        }
      }
#pragma unroll
      for (int j = 0; j < kEmbCols / 32; ++j) part[warp][lane + 32 * j] = acc[j];
      __syncthreads();
      for (int d = threadIdx.x; d < cols; d += blockDim.x) {
        float sum = 0.f;
        for (int w = 0; w < kEmbWarps; ++w) sum += part[w][d];
        if (slot < 0)
          dst[c0 + d] += sum;
        else
          dst[c0 + d] = sum;
      }
      __syncthreads();
    }
  }
}

// dwte[id] += the id's slots (ids with more than one segment): a CTA per (id, 32 columns), warp w
// summing slots w, w + kEmbWarps, ... in order, the warps' sums added in warp order.
__global__ void embedding_slots_kernel(float* dwte, const float* slots, const int32_t* index, int64_t N, int64_t D) {
  __shared__ float part[kEmbWarps][32];
  const EmbIndex ix(index, N);
  const int nmulti = index[1], warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t d = blockIdx.y * 32 + lane;
  for (int m = blockIdx.x; m < nmulti; m += gridDim.x) {
    const int s0 = ix.multi_slot0[m], s1 = ix.multi_slot0[m + 1];
    float sum = 0.f;
    if (d < D) {
      int k = s0 + warp;
      for (; k + 3 * kEmbWarps < s1; k += 4 * kEmbWarps) {  // four slots' loads in flight
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) x[u] = slots[static_cast<int64_t>(k + u * kEmbWarps) * D + d];
#pragma unroll
        for (int u = 0; u < 4; ++u) sum += x[u];
      }
      for (; k < s1; k += kEmbWarps) sum += slots[static_cast<int64_t>(k) * D + d];
    }
    part[warp][lane] = sum;
    __syncthreads();
    if (warp == 0 && d < D) {
      float t = 0.f;
      for (int w = 0; w < kEmbWarps; ++w) t += part[w][lane];
      dwte[static_cast<int64_t>(ix.multi_id[m]) * D + d] += t;
    }
    __syncthreads();
  }
}

__global__ void scale_kernel(float* x, float alpha, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= alpha;
}

__global__ void add_bias_kernel(float* out, const float* bias, int64_t N, int64_t O) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * O) out[i] += bias[i % O];
}
// Four columns per thread (O % 4 == 0, out and bias 16-byte aligned; O4 = O / 4, 32-bit indices).
__global__ void add_bias4_kernel(float4* out, const float4* bias, uint32_t n4, uint32_t O4) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const float4 b = bias[i % O4];
  float4 o = out[i];
  o.x += b.x, o.y += b.y, o.z += b.z, o.w += b.w;
  out[i] = o;
}
// Whether the four-column kernels apply: cols % 4 == 0, n / 4 + blockDim < 2^32, pointers 16-byte aligned.
bool four_columns(int64_t n, int64_t cols, const void* a, const void* b) {
  return cols % 4 == 0 && n / 4 < (int64_t{1} << 31) && aligned_to(a, 16) && aligned_to(b, 16);
}

// out[n, :] = inp[row_of[n], :], zeros where row_of[n] < 0, for a and b at once: group g of V
// columns of the [N, Da + Db] rows a thread (V = 4: Da and Db multiples of 4, 16- and 8-byte
// aligned rows), so that the whole output is written once, zeros included.
template <class TB, int V>
__global__ void expand_rows_kernel(float* oa, const float* ia, int Da, TB* ob, const TB* ib, int Db,
                                   const int32_t* row_of, int64_t N) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, W = (Da + Db) / V;
  if (g >= N * W) return;
  const int64_t n = g / W;
  const int c = static_cast<int>(g - n * W) * V;
  const int32_t m = row_of[n];
  auto copy = [&](auto* out, const auto* in, int cols, int col) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(in)>>;
    using Vec = std::conditional_t<V == 1, T, std::conditional_t<sizeof(T) == 4, float4, uint2>>;  // V of T
    Vec x{};
    if (m >= 0) x = *reinterpret_cast<const Vec*>(in + static_cast<int64_t>(m) * cols + col);
    *reinterpret_cast<Vec*>(out + n * cols + col) = x;
  };
  if (c < Da) copy(oa, ia, Da, c);
  else copy(ob, ib, Db, c - Da);
}

}  // namespace

using namespace ops_detail;

// ---- host wrappers ------------------------------------------------------------------------------
void embedding_forward_cuda(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t D,
                            cudaStream_t stream) {
  if (N <= 0) return;
  if (four_columns(N * D, D, out, wte)) {
    const int64_t n4 = N * D / 4;
    embedding_forward4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), ids, reinterpret_cast<const float4*>(wte), static_cast<uint32_t>(n4),
        static_cast<uint32_t>(D / 4));
  } else {
    embedding_forward_kernel<<<blocks_for(N * D), kThreads, 0, stream>>>(out, ids, wte, N, D);
  }
  SB_CUDA_CHECK_LAUNCH();
}

int64_t embedding_segment_rows(int64_t N, int64_t D, int64_t floats) {
  // slots <= 2 N / rows + 1 (every many-segment id has at least one full segment)
  const int64_t per_row = std::max<int64_t>(1, floats / std::max<int64_t>(1, D) - 1);
  return std::max<int64_t>(kEmbMinRows, (2 * N + per_row - 1) / per_row);
}

void embedding_index_build(int32_t* index, const int32_t* ids, int64_t N, int64_t V, int64_t D, int32_t* counts,
                           int64_t scratch_floats) {
  const int64_t max_rows = embedding_segment_rows(N, D, scratch_floats);
  int32_t *seg_id = index + 2, *seg_begin = index + 2 + N, *seg_slot = index + 3 + 2 * N, *order = index + 3 + 3 * N;
  int32_t *multi_id = index + 3 + 4 * N, *multi_slot0 = index + 3 + 5 * N;
  std::fill(counts, counts + V, 0);
  for (int64_t n = 0; n < N; ++n) ++counts[ids[n]];
  int32_t nseg = 0, nmulti = 0, slot = 0, pos = 0;
  for (int64_t v = 0; v < V; ++v) {
    const int32_t c = counts[v];
    if (c == 0) continue;
    const bool multi = c > max_rows;
    if (multi) multi_id[nmulti] = static_cast<int32_t>(v), multi_slot0[nmulti++] = slot;
    for (int32_t b = 0; b < c; b += static_cast<int32_t>(max_rows)) {
      seg_id[nseg] = static_cast<int32_t>(v), seg_begin[nseg] = pos + b, seg_slot[nseg] = multi ? slot++ : -1;
      ++nseg;
    }
    counts[v] = pos;  // the id's write cursor in order[]
    pos += c;
  }
  seg_begin[nseg] = pos, multi_slot0[nmulti] = slot;
  index[0] = nseg, index[1] = nmulti;
  for (int64_t n = 0; n < N; ++n) order[counts[ids[n]]++] = static_cast<int32_t>(n);
}

void embedding_backward_cuda(float* dwte, const float* dout, const int32_t* index, int64_t N, int64_t V, int64_t D,
                             cudaStream_t stream, ReduceScratch scratch) {
  if (N <= 0 || D <= 0) return;
  // At most N / rows + min(V, N) segments (an id's count c in ceil(c / rows) of them), a CTA each.
  const int64_t rows = embedding_segment_rows(N, D, scratch.floats);
  const int64_t grid = std::min<int64_t>({N, N / rows + std::min(V, N), 16384});
  embedding_segments_kernel<<<static_cast<unsigned>(grid), 32 * kEmbWarps, 0, stream>>>(dwte, scratch.data, dout,
                                                                                     index, N, D);
  SB_CUDA_CHECK_LAUNCH();
  const int64_t multi_grid = std::min<int64_t>({N / kEmbMinRows + 1, V, 16384});  // segments have >= kEmbMinRows rows
  embedding_slots_kernel<<<dim3(static_cast<unsigned>(multi_grid), static_cast<unsigned>((D + 31) / 32)),
                           32 * kEmbWarps, 0, stream>>>(dwte, scratch.data, index, N, D);
  SB_CUDA_CHECK_LAUNCH();
}


void scale_cuda(float* x, float alpha, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, alpha, n);
  SB_CUDA_CHECK_LAUNCH();
}

void add_bias_cuda(float* out, const float* bias, int64_t N, int64_t O, cudaStream_t stream) {
  if (N * O <= 0) return;
  if (four_columns(N * O, O, out, bias)) {
    const int64_t n4 = N * O / 4;
    add_bias4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(out),
                                                               reinterpret_cast<const float4*>(bias),
                                                               static_cast<uint32_t>(n4), static_cast<uint32_t>(O / 4));
  } else {
    add_bias_kernel<<<blocks_for(N * O), kThreads, 0, stream>>>(out, bias, N, O);
  }
  SB_CUDA_CHECK_LAUNCH();
}

void bias_backward_cuda(float* dbias, const float* dout, int64_t N, int64_t O, cudaStream_t stream,
                        ReduceScratch scratch) {
  colsum(dbias, dout, nullptr, nullptr, nullptr, N, O, 0, stream, scratch);
}

void weight_grad_narrow_cuda(float* dweight, const float* dout, const float* inp, int64_t N, int64_t I, int64_t O,
                             cudaStream_t stream, ReduceScratch scratch) {
  if (I <= 0) return;
  colsum(dweight, inp, dout, nullptr, nullptr, N, O * I, 3, stream, scratch, I);
}

void expand_rows_cuda(float* out_a, const float* inp_a, int64_t Da, void* out_b, const void* inp_b, int64_t Db,
                      bool b_bf16, const int32_t* row_of, int64_t N, cudaStream_t stream) {
  const int64_t n = N * (Da + Db);
  if (n <= 0) return;
  const bool four = Da % 4 == 0 && Db % 4 == 0 && aligned_to(out_a, 16) && aligned_to(inp_a, 16) &&
                    (Db == 0 || (aligned_to(out_b, 8) && aligned_to(inp_b, 8)));
  auto launch = [&](auto tb, auto v) {
    using TB = decltype(tb);
    constexpr int V = decltype(v)::value;
    expand_rows_kernel<TB, V>
        <<<blocks_for(n / V), kThreads, 0, stream>>>(out_a, inp_a, static_cast<int>(Da), static_cast<TB*>(out_b),
                                                     static_cast<const TB*>(inp_b), static_cast<int>(Db), row_of, N);
  };
  using Four = std::integral_constant<int, 4>;
  using One = std::integral_constant<int, 1>;
  if (b_bf16 && four) launch(uint16_t{}, Four{});
  else if (b_bf16) launch(uint16_t{}, One{});
  else if (four) launch(float{}, Four{});
  else launch(float{}, One{});
  SB_CUDA_CHECK_LAUNCH();
}
// The gather is the same row copy with `rows` as the index: out[m, :] = inp[rows[m], :].
void gather_rows_cuda(float* out_a, const float* inp_a, int64_t Da, void* out_b, const void* inp_b, int64_t Db,
                      bool b_bf16, const int32_t* rows, int64_t M, cudaStream_t stream) {
  expand_rows_cuda(out_a, inp_a, Da, out_b, inp_b, Db, b_bf16, rows, M, stream);
}

}  // namespace sb::cuda