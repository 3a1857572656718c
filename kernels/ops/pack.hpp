// pack.hpp: side-by-side packing of row-major matrices and the matching split of a sum. The
// runner packs the gradients of an attention's input projections (q, k, v, gate, PaTH's w1 and
// beta) into one [N, K] operand so that their backward is one product each way, packs the
// weights the same way, and adds the packed weight gradient back into each parameter.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace sb::cuda {

constexpr int kMaxPackParts = 8;

// One source of pack_columns_cuda: a row-major [rows, cols] matrix of fp32 or bf16 (raw 16-bit) values,
// or (in_place) columns that its producer wrote into the destination itself: left as they are.
struct PackPart {
  const void* data = nullptr;
  int64_t cols = 0;
  bool f32 = true;
  bool in_place = false;
};

// dst[r, :] = [parts[0][r, :] | parts[1][r, :] | ... | 0 ...] for r < rows: dst is [rows, ld] with
// ld >= the parts' columns (the rest of each row zeroed), fp32 (dst_f32) or bf16. With a bf16 dst,
// fp32 parts are rounded to nearest even; an fp32 dst takes fp32 parts only. 1 <= n_parts <= kMaxPackParts.
void pack_columns_cuda(void* dst, bool dst_f32, int64_t ld, const PackPart* parts, int n_parts, int64_t rows,
                       cudaStream_t stream);

// One destination of add_segments_cuda: count floats.
struct AddSegment {
  float* data = nullptr;
  int64_t count = 0;
};

// segs[j].data[i] += src[s_j + i] for i < segs[j].count, s_j = the counts of the segments before j
// (consecutive stretches of src; a segment with null data is skipped). 1 <= n_segs <= kMaxPackParts.
void add_segments_cuda(const float* src, const AddSegment* segs, int n_segs, cudaStream_t stream);

}  // namespace sb::cuda
