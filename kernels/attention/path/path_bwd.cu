// path_bwd.cu: instantiates the PaTH attention backward's pairs kernel (one
// instantiation per head dim; the own blocks are kernels/attention/path/path_bwd_own.cu's) with its launcher, shared-memory
// size and occupancy query, and the wgmma pass over its inter-superchunk pairs
// (softmax_bwd_wgmma_kernel<Dh, true, kTma>). The kernels are in kernels/attention/path/path_bwd_pairs_sm80.cuh and kernels/attention/softmax/softmax_sm90.cuh;
// kernels/attention/attention.cpp sequences them with the factor kernels. The states launch before that pass is
// the kernel's chain-only instantiation.
#include <algorithm>

#include "kernels/attention/path/path_bwd_pairs_sm80.cuh"
#include "kernels/attention/softmax/softmax_sm90.cuh"

namespace sb::cuda::detail {

int path_bwd_smem_bytes(int64_t Dh, bool f32, bool dense, int warps, int stages) {
  return bwd_smem(nullptr, static_cast<int>(Dh), f32, dense, 16 * warps, stages).bytes;
}

int path_bwd_occupancy(int64_t Dh, bool f32, int warps, int smem) {
  int occ = 0;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = f32 ? path_bwd_kernel<D, true> : path_bwd_kernel<D, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 32 * warps, smem));
  });
  return occ;
}

template <>
void launch_bwd<true>(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream) {
  check_head_group(p.bh0, p.nbh, p.B * p.H, "PaTH attention backward: bad group of heads");
  if (!p.tickets) throw_error("PaTH attention backward: no item counters (tickets)");
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? path_bwd_kernel<D, false> : path_bwd_kernel<D, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.smem));
    kernel<<<cfg.grid, 32 * cfg.warps, cfg.smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

namespace {

// The states launch and the wgmma pass need bf16, Dh 64 or 128, 4-warp query blocks, superchunks
// and the group's xs / dxs buffers.
void check_inter_pass(const BwdParams& p, int64_t Dh) {
  check_head_group(p.bh0, p.nbh, p.B * p.H, "PaTH attention backward: bad group of heads");
  if (!p.bf16 || (Dh != 64 && Dh != 128) || p.sc < 2 || p.nsc < 2 || !p.xs || !p.dxs || !p.tickets || p.warps != 4)
    throw_error("PaTH attention backward: the wgmma inter-superchunk pass needs bf16, Dh 64 or 128 and superchunks");
}

template <class F>
void with_states_kernel(int64_t Dh, F&& f) {
  if (Dh == 64) f(path_bwd_kernel<64, false, true>);
  else f(path_bwd_kernel<128, false, true>);
}

}  // namespace

PathStatesShape path_states_shape(int64_t Dh) {
  PathStatesShape s;
  with_states_kernel(Dh, [&](auto* kernel) {
    // Two pipeline stages unless one stage lets more CTAs share an SM (Dh = 128: factored operands).
    int occ[3] = {0, 0, 0}, smem[3] = {0, 0, 0};
    for (int st = 1; st <= 2; ++st) {
      smem[st] = states_smem(nullptr, static_cast<int>(Dh), path_dense(Dh), 64, st).bytes;
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem[st]));
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[st], kernel, 128, smem[st]));
    }
    s.stages = occ[1] > occ[2] ? 1 : 2;
    s.smem = smem[s.stages];
    s.occupancy = std::max(1, occ[s.stages]);
  });
  return s;
}

void launch_path_states(const BwdParams& p0, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream) {
  check_inter_pass(p0, Dh);
  BwdParams p = p0;
  p.inter = 1, p.stages = cfg.states_stages;
  const int64_t items = static_cast<int64_t>(p.nqb) * p.nbh;
  const int grid = static_cast<int>(std::min<int64_t>(items, cfg.states_grid));
  with_states_kernel(Dh, [&](auto* kernel) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.states_smem));
    kernel<<<grid, 128, cfg.states_smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

namespace {

// One thread: the blocks n = a sc + j < nb by cost wj j + wa a from the highest, ties by larger j.
__global__ void path_item_order_kernel(int* order, int nb, int sc, int nsc, ItemWeights w) {
  int r = 0;
  for (int c = w.wj * (sc - 1) + w.wa * (nsc - 1); c >= 0; --c)
    for (int j = min(sc - 1, c / w.wj); j >= 0; --j) {
      const int rest = c - w.wj * j;
      if (rest % w.wa) continue;
      const int a = rest / w.wa, n = a * sc + j;
      if (a >= nsc) break;  // a grows as j falls
      if (n < nb) order[r++] = n;
    }
}

}  // namespace

void launch_path_item_order(int* order, int nb, int sc, int nsc, ItemWeights w, cudaStream_t stream) {
  if (sc < 1 || nsc < 1 || w.wj < 1 || w.wa < 1 || static_cast<int64_t>(sc) * nsc < nb)
    throw_error("PaTH attention backward: bad superchunks or weights for the item order");
  path_item_order_kernel<<<1, 1, 0, stream>>>(order, nb, sc, nsc, w);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_path_inter_bwd(const BwdParams& p, int64_t Dh, cudaStream_t stream) {
  check_inter_pass(p, Dh);
  // CTAs: (query range of superchunk b < nsc - 1, pair of its key blocks, head of the group),
  // superchunk 0's ranges first (it has the most query blocks after it).
  const int64_t grid = inter_ranges(p.nb, p.sc, p.nsc, p.qchunk) * ((p.sc + 1) / 2) * p.nbh;
  launch_bwd_wgmma<true>(p, p.dxs, p.nbh * p.xs_rows, Dh, grid, stream);
}

}  // namespace sb::cuda::detail
