// sba_bwd.cu: the flash-style stick-breaking attention backward kernel and its launcher. One CTA =
// one 64-query block of one head (4 warps x 16 rows), Q and dO in shared memory, two walks over the
// key blocks from the query backwards (the forward's stopping rule): c_i = sum_j a_ij + r_i g_i in
// fp32, then dz = a - beta (c - n) with n a running suffix of a (docs/attention.md); dQ in registers,
// dK and dV per key block through shared-memory tiles and fp32 atomics.
#include "kernels/attention/sba/sba_common.cuh"

namespace sb::cuda::detail {
namespace {

template <int Dh, bool kF32>
__global__ void __launch_bounds__(128) sba_bwd_kernel(const SbaParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  constexpr bool f32 = kF32, bf = !kF32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const SbaSmem sm = sba_smem(smem_raw, Dh, f32, true, p.stages);
  const int tid = threadIdx.x, lane = tid & 31, r0 = 16 * (tid >> 5);
  const SbaItem it = sba_item(p, Dh);
  const int64_t Tp = static_cast<int64_t>(p.nb) * kL;
  const float sl2 = p.scale * kLog2e;

  load_input_tile<bf>(sm.Q, kL, Dh, input_at<bf>(p.q, it.head0 + it.i0 * it.rs), it.rs, it.nvalid, tid);
  load_input_tile<bf>(sm.dO, kL, Dh, input_at<bf>(p.dout, it.head0 + it.i0 * it.rs), it.rs, it.nvalid, tid);
  cp_async_commit();  // completes with the first walk's first wait

  float acc2[2] = {0.f, 0.f};
  auto spent = [&] { return !sba_keep(acc2[0]) && !sba_keep(acc2[1]); };
  // S = Q K^T -> log2 sigmoid, N -> suffix sums of log2 (1 - beta), P = dO V^T; then per kept key
  // A = 2^(lsp2 + L2) and, in place: S <- beta (0 where not kept), N <- A, P <- a = A dP.
  auto weights = [&](int m, const Tile& K, const Tile& V, float (&S)[8][4], float (&N)[8][4], float (&P)[8][4]) {
    float tot[2];
    zero(S);
    zero(P);
    mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, K, 0, 0, f32, lane);   // Q K^T
    mma_sA<8, false, BL::NK>(P, sm.dO, r0, 0, KTD, V, 0, 0, f32, lane);  // dO V^T
    sba_logs(S, N, sl2, m == it.n, r0, it.nvalid, lane);
    row_suffix_sums(N, tot, lane);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float L2 = acc2[e >> 1] + N[nt][e];
        const bool keep = sba_keep(L2);
        const float A = keep ? fast_exp2(S[nt][e] + L2) : 0.f;
        S[nt][e] = keep ? fast_exp2(S[nt][e]) : 0.f;
        N[nt][e] = A;
        P[nt][e] *= A;
      }
    acc2[0] += tot[0], acc2[1] += tot[1];
  };

  // ---- walk 1: c_i ----
  float csum[2] = {0.f, 0.f};
  sba_init_survival(acc2, r0, it.nvalid, lane);
  sba_walk<bf, Dh>(p, sm, it, tid, spent, [&](int m, const Tile& K, const Tile& V) {
    float S[8][4], N[8][4], P[8][4];
    weights(m, K, V, S, N, P);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) csum[0] += P[nt][0] + P[nt][1], csum[1] += P[nt][2] + P[nt][3];
  });
  float c[2], rem[2];
  {  // this warp's rows of dO and v (fp32 accumulator layout): g_i = dO_i . v_i
    float dOi[NTD][4], Vi[NTD][4], g[2] = {0.f, 0.f};
    load_frag_global(dOi, input_at<bf>(p.dout, it.head0 + it.i0 * it.rs), it.rs, bf, r0, it.nvalid, lane);
    load_frag_global(Vi, input_at<bf>(p.v, it.head0 + it.i0 * it.rs), it.rs, bf, r0, it.nvalid, lane);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) g[e >> 1] += dOi[nt][e] * Vi[nt][e];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      rem[rr] = p.remainder ? fast_exp2(acc2[rr]) : 0.f;
      c[rr] = quad_sum(csum[rr]) + rem[rr] * quad_sum(g[rr]);
    }
  }

  // ---- walk 2: the gradients ----
  float dQ[NTD][4], ncar[2] = {0.f, 0.f};
  zero(dQ);
  sba_init_survival(acc2, r0, it.nvalid, lane);
  sba_walk<bf, Dh>(p, sm, it, tid, spent, [&](int m, const Tile& K, const Tile& V) {
    float S[8][4], N[8][4], P[8][4], tot[2];
    weights(m, K, V, S, N, P);
    store_frag(sm.A, r0, N, 1.f, lane);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) N[nt][e] = P[nt][e];
    row_suffix_sums(N, tot, lane);  // sum of a over the keys after j within the block
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) P[nt][e] -= S[nt][e] * (c[e >> 1] - (ncar[e >> 1] + N[nt][e]));  // dz
    ncar[0] += tot[0], ncar[1] += tot[1];
    mma_rA<4, NTD, BL::KN>(dQ, P, 1.f, K, 0, 0, f32, lane);  // dQ += dz K
    store_frag(sm.dZ, r0, P, p.scale, lane);
    __syncthreads();
    // This warp's 16 keys of the block: dK += (scale dz)^T Q, dV += A^T dO.
    const int64_t k0 = static_cast<int64_t>(m) * kL;
    float part[NTD][4];
    zero(part);
    mma_sA<NTD, true, BL::KN>(part, sm.dZ, r0, 0, 4, sm.Q, 0, 0, f32, lane);
    atomic_frag(p.dk_acc + (it.bh * Tp + k0) * Dh, Dh, r0, part, 1.f, lane);
    zero(part);
    mma_sA<NTD, true, BL::KN>(part, sm.A, r0, 0, 4, sm.dO, 0, 0, f32, lane);
    atomic_frag(p.dv_acc + (it.bh * Tp + k0) * Dh, Dh, r0, part, 1.f, lane);
  });

  constexpr size_t esz = bf ? 2 : 4;
  store_frag_global(static_cast<unsigned char*>(p.dq) + (it.head0 + it.i0 * it.rs) * esz, it.rs, bf, r0, it.nvalid,
                    dQ, p.scale, lane);
  if (p.remainder) {  // dV_i += r_i dO_i
    float dOi[NTD][4];
    load_frag_global(dOi, input_at<bf>(p.dout, it.head0 + it.i0 * it.rs), it.rs, bf, r0, it.nvalid, lane);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dOi[nt][e] *= rem[e >> 1];
    atomic_frag(p.dv_acc + (it.bh * Tp + it.i0) * Dh, Dh, r0, dOi, 1.f, lane);
  }
}

}  // namespace

void launch_sba_bwd(const SbaParams& params, int64_t Dh, cudaStream_t stream) {
  SbaParams p = params;
  const int64_t blocks = static_cast<int64_t>(p.nb) * p.B * p.H;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? sba_bwd_kernel<D, false> : sba_bwd_kernel<D, true>;
    p.stages = sba_smem(nullptr, D, !p.bf16, true, 2).bytes <= device_max_smem() ? 2 : 1;
    const int smem = sba_smem(nullptr, D, !p.bf16, true, p.stages).bytes;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(blocks), 128, smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
