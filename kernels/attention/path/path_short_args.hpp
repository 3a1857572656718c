// path_short_args.hpp: the kernel arguments shared by the short-sequence PaTH kernels
// (path_short_sm80.cu: a CTA per head; path_short_warp_sm80.cu: two warps per head) and their filling
// from a forward or backward call's operands.
#pragma once
#include <cstdint>

#include "kernels/attention/attention.hpp"

namespace sb::cuda::detail {

// One head's tensors in global memory: row t of q, k, v, w, out, dout and their gradients starts at
// e0 + t es (es = H Dh); beta, log_f, dbeta, dlog_f at s0 + t H; lse at (b H + h) T + t.
struct PathShortArgs {
  const void *q, *k, *v, *dout;
  const float *w, *beta, *log_f;
  void *out, *dq, *dk, *dv;
  float *lse, *dw, *dbeta, *dlog_f;
  const float* lse_in;
  int64_t T, H;
  float scale;
};

inline PathShortArgs path_short_forward_args(void* out, float* lse, const void* q, const void* k, const void* v,
                                             const float* w, const float* beta, const float* log_f,
                                             const AttnDims& d, float scale) {
  PathShortArgs a{};
  a.T = d.T, a.H = d.H, a.scale = scale;
  a.q = q, a.k = k, a.v = v, a.w = w, a.beta = beta, a.log_f = log_f, a.out = out, a.lse = lse;
  return a;
}

// The backward recomputes the forward from lse; dlog_f is written only with a gate (log_f).
inline PathShortArgs path_short_backward_args(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f,
                                              const void* dout, const void* q, const void* k, const void* v,
                                              const float* w, const float* beta, const float* log_f,
                                              const float* lse, const AttnDims& d, float scale) {
  PathShortArgs a{};
  a.T = d.T, a.H = d.H, a.scale = scale;
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.w = w, a.beta = beta, a.log_f = log_f, a.lse_in = lse;
  a.dq = dq, a.dk = dk, a.dv = dv, a.dw = dw, a.dbeta = dbeta, a.dlog_f = log_f ? dlog_f : nullptr;
  return a;
}

}  // namespace sb::cuda::detail
