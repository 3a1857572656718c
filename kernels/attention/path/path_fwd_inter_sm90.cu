// path_fwd_inter_sm90.cu: the PaTH forward's pairs between superchunks on Hopper wgmma (bf16, Dh 64 /
// 128): plain attention between the query states X_{e_b} that the fused forward wrote to xs and the
// keys pushed to superchunk b's end (ke_hi), merged into the fused kernel's out and lse (the own
// superchunk's part). The same tiles, pipeline and online softmax as softmax_fwd_wgmma_kernel.
#include "kernels/attention/softmax/softmax_sm90.cuh"

namespace sb::cuda::detail {

namespace {

// Adds this warp's rows r0 + g (+8) < nvalid of the pass (unnormalised O with running max m2 and
// sums l, log2 units) to the fused kernel's normalised output and lse of the same rows.
template <int NTD>
__device__ __forceinline__ void fwd_merge(const FwdParams& p, const float (&O)[NTD][4], const float (&m2)[2],
                                          const float (&l)[2], int64_t bh, int64_t i0, int nvalid, bf16* out_rows,
                                          int64_t rs, int r0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
  float w1[2], w2[2], tot[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float lt = quad_sum(l[rr]);
    const int row = r0 + g + 8 * rr;
    const float lse1 = row < nvalid ? p.lse[bh * p.T + i0 + row] * kLog2e : -INFINITY;
    const float lse2 = m2[rr] + log2f(lt);
    const float mx = fmaxf(lse1, lse2);
    tot[rr] = mx + log2f(exp2f(lse1 - mx) + exp2f(lse2 - mx));
    w1[rr] = exp2f(lse1 - tot[rr]);
    w2[rr] = exp2f(lse2 - tot[rr]) / lt;
  }
  __syncwarp();  // every lane of the quad has read lse before lane 0 writes it
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int row = r0 + g + 8 * rr;
    if (row >= nvalid) continue;
    if (tq == 0) p.lse[bh * p.T + i0 + row] = tot[rr] * kLn2;
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt) {
      const int64_t idx = row * rs + nt * 8 + 2 * tq;
      const float2 o1 = load2(out_rows, idx, true);
      store2(out_rows, idx, o1.x * w1[rr] + O[nt][2 * rr] * w2[rr], o1.y * w1[rr] + O[nt][2 * rr + 1] * w2[rr], true);
    }
  }
}

// One CTA of two warpgroups per 128 queries (query blocks 2 n2 + w, w the warpgroup) of one head of
// the group; query block n in superchunk a takes the key blocks m < a sc, superchunk by superchunk
// from a - 1 down to 0, with its state X_{e_b} for superchunk b's keys (reloaded from xs when the
// walk enters b: one exposed load per superchunk). No causal mask (earlier superchunks are whole
// blocks); the gate biases as in the softmax forward. CTAs whose queries are all in superchunk 0
// exit at once.
template <int Dh>
__global__ void __launch_bounds__(256, 2) path_fwd_inter_kernel(const FwdParams p) {
#if SB_WGMMA
  constexpr int NTD = Dh / 8, KTD = Dh / 16, tile = sw_bytes(kL, Dh), kS = kWgFwdStages;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* const sQ = align1024(smem_raw);  // warpgroup w's 64 states at sQ + w tile
  unsigned char* const sKV = sQ + 2 * tile;       // stage s: K at sKV + 2 s tile, V one tile further
  float* const colb = reinterpret_cast<float*>(sKV + 2 * kS * tile);  // [kS][64]
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, r0 = 16 * warp;
  const int nq2 = (p.nb + 1) / 2;
  int64_t lb, job;  // heaviest (last) query blocks first
  head_order(blockIdx.x, p.nbh, nq2, p.head_chunk, lb, job);
  const int64_t bh = p.bh0 + lb, b = bh / p.H, h = bh % p.H;
  const int n2 = nq2 - 1 - static_cast<int>(job), n = 2 * n2 + wg;
  const int top = min(2 * n2 + 1, p.nb - 1) / p.sc * p.sc - 1;  // the last key block of either warpgroup
  if (top < 0) return;                                           // the CTA's queries are all in superchunk 0
  const int s_a = n < p.nb ? n / p.sc * p.sc : 0;                // this warpgroup's keys: m < s_a
  const int64_t c0 = static_cast<int64_t>(n2) * 2 * kL, i0 = c0 + wg * kL, rs = p.H * Dh;
  const int64_t Tp = static_cast<int64_t>(p.nb) * kL, S = static_cast<int64_t>(p.sc) * kL;
  const int64_t head0 = (b * p.T * p.H + h) * Dh;
  const int nvalid = static_cast<int>(min64(kL, p.T - i0));
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[c0] : 0.0;
  const float sl2 = p.scale * kLog2e;
  const bool prescale = gh != nullptr;
  const float scale2 = prescale ? 1.f : sl2;
  float rb2[2];
  query_gate_bias(rb2, gh, i0, r0, p.T, gref, lane);
  const bf16* ke = reinterpret_cast<const bf16*>(p.ke_hi) + bh * Tp * Dh;
  const bf16* v = static_cast<const bf16*>(p.v);
  const bf16* xs = reinterpret_cast<const bf16*>(p.xs) + lb * p.xs_rows * Dh;
  auto load_states = [&](int sb) {  // X_{e_sb} of each warpgroup whose block is after superchunk sb
    for (int w = 0; w < 2; ++w) {
      const int64_t nw = 2 * n2 + w;
      if (nw >= p.nb || nw * kL < (sb + 1) * S) continue;
      const int64_t row0 = sc_state_row(sb, Tp, S) + nw * kL - (sb + 1) * S;
      sw_copy_tile_async<kL, Dh>(sQ + w * tile, xs + row0 * Dh, Dh, kL, tid);
    }
    cp_async_commit();
  };
  auto issue = [&](int it) {  // key block top - it into stage it % kS (an empty group past block 0)
    if (it <= top) {
      const int64_t k0 = static_cast<int64_t>(top - it) * kL;
      unsigned char* kv = sKV + 2 * (it % kS) * tile;
      sw_copy_tile_async<kL, Dh>(kv, ke + k0 * Dh, Dh, kL, tid);
      sw_copy_tile_async<kL, Dh>(kv + tile, v + head0 + k0 * rs, rs, kL, tid);
      fill_colbias(colb + (it % kS) * kL, gh, k0, p.T, gref, tid);
    }
    cp_async_commit();
  };

  float O[NTD][4], m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  zero(O);
  load_states(top / p.sc);
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) issue(s);
  for (int it = 0; it <= top; ++it) {
    const int m = top - it, cur = it % kS;
    cp_async_wait<kS - 2>();  // key block m has landed
    fence_async_smem();
    __syncthreads();  // ... for every thread; and every warpgroup is done with the stage refilled next
    if (it > 0 && m % p.sc == p.sc - 1) {  // entering superchunk m / sc: its states
      load_states(m / p.sc);
      cp_async_wait<0>();
      fence_async_smem();
      __syncthreads();
    }
    issue(it + kS - 1);
    if (m >= s_a || nvalid <= 0) continue;
    const unsigned char* Kc = sKV + 2 * cur * tile;
    float Sc[8][4];
    wg_scores<KTD>(Sc, sQ + wg * tile, kL, 0, Kc);
    if (prescale) fwd_logits(Sc, true, sl2, rb2, colb + cur * kL, false, r0, nvalid, lane);
    wg_softmax_pv(Sc, O, m2, l, scale2, Kc + tile);
  }
  if (nvalid > 0 && s_a > 0)
    fwd_merge(p, O, m2, l, bh, i0, nvalid, static_cast<bf16*>(p.out) + head0 + i0 * rs, rs, r0, lane);
#endif
}

}  // namespace

void launch_path_fwd_inter(const FwdParams& params, int64_t Dh, cudaStream_t stream) {
  if (!params.bf16 || (Dh != 64 && Dh != 128) || params.sc < 2 || params.nsc < 2 || !params.xs || !params.inter ||
      params.nbh < 1 || params.bh0 < 0 || params.bh0 + params.nbh > params.B * params.H)
    throw_error("PaTH attention forward: the wgmma inter-superchunk pass needs bf16, Dh 64 or 128, superchunks and a "
                "head group");
  FwdParams p = params;
  launch_wgmma(path_fwd_inter_kernel<64>, path_fwd_inter_kernel<128>, wg_fwd_smem_bytes(64), wg_fwd_smem_bytes(128),
               p, Dh, static_cast<int64_t>((p.nb + 1) / 2) * p.nbh, stream);
}

}  // namespace sb::cuda::detail
