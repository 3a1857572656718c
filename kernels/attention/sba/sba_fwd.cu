// sba_fwd.cu: the flash-style stick-breaking attention forward kernel and its launcher. One CTA =
// one 64-query block of one head, 4 warps x 16 query rows; key blocks stream from the query's own
// block backwards (sba_walk), each scored by mma.sync (split bf16 products for fp32 inputs), turned
// into weights with the row's running log2 survival, and accumulated as O += A V; the walk stops
// once every row's stick is spent (kSbaFloor2). Then O += r v_i (the remainder) and O is stored.
#include "kernels/attention/sba/sba_common.cuh"

namespace sb::cuda::detail {
namespace {

template <int Dh, bool kF32>
__global__ void __launch_bounds__(128) sba_fwd_kernel(const SbaParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  constexpr bool f32 = kF32, bf = !kF32;  // fp32 inputs: split products; bf16 inputs are exact in one plane
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const SbaSmem sm = sba_smem(smem_raw, Dh, f32, false, p.stages);
  const int tid = threadIdx.x, lane = tid & 31, r0 = 16 * (tid >> 5);
  const SbaItem it = sba_item(p, Dh);
  const float sl2 = p.scale * kLog2e;

  load_input_tile<bf>(sm.Q, kL, Dh, input_at<bf>(p.q, it.head0 + it.i0 * it.rs), it.rs, it.nvalid, tid);
  cp_async_commit();  // completes with the walk's first wait

  float O[NTD][4], acc2[2];
  zero(O);
  sba_init_survival(acc2, r0, it.nvalid, lane);
  sba_walk<bf, Dh>(
      p, sm, it, tid, [&] { return !sba_keep(acc2[0]) && !sba_keep(acc2[1]); },
      [&](int m, const Tile& K, const Tile& V) {
        float S[8][4], N[8][4], tot[2];
        zero(S);
        mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, K, 0, 0, f32, lane);  // Q K^T
        sba_logs(S, N, sl2, m == it.n, r0, it.nvalid, lane);
        row_suffix_sums(N, tot, lane);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float L2 = acc2[e >> 1] + N[nt][e];
            S[nt][e] = sba_keep(L2) ? fast_exp2(S[nt][e] + L2) : 0.f;
          }
        acc2[0] += tot[0], acc2[1] += tot[1];
        mma_rA<4, NTD, BL::KN>(O, S, 1.f, V, 0, 0, f32, lane);  // O += A V
      });

  if (p.remainder) {  // out_i += r_i v_i, r_i = 2^acc2 (0 for padded rows and spent sticks)
    float Vi[NTD][4];
    load_frag_global(Vi, input_at<bf>(p.v, it.head0 + it.i0 * it.rs), it.rs, bf, r0, it.nvalid, lane);
    const float rem[2] = {fast_exp2(acc2[0]), fast_exp2(acc2[1])};
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) O[nt][e] += rem[e >> 1] * Vi[nt][e];
  }
  constexpr size_t esz = bf ? 2 : 4;
  store_frag_global(static_cast<unsigned char*>(p.out) + (it.head0 + it.i0 * it.rs) * esz, it.rs, bf, r0, it.nvalid,
                    O, 1.f, lane);
}

}  // namespace

void launch_sba_fwd(const SbaParams& params, int64_t Dh, cudaStream_t stream) {
  SbaParams p = params;
  const int64_t blocks = static_cast<int64_t>(p.nb) * p.B * p.H;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? sba_fwd_kernel<D, false> : sba_fwd_kernel<D, true>;
    p.stages = sba_smem(nullptr, D, !p.bf16, false, 2).bytes <= device_max_smem() ? 2 : 1;
    const int smem = sba_smem(nullptr, D, !p.bf16, false, p.stages).bytes;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(blocks), 128, smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
