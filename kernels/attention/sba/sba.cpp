// sba.cpp: the host entry points of stick-breaking attention (kernels/attention/attention.hpp):
// argument checks, the backward's accumulator workspace (the caller's, or stream-ordered), the
// launches (sba_fwd.cu, sba_bwd.cu) and the accumulators' conversion to dk, dv.
#include <cmath>
#include <initializer_list>

#include "core/error.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/internal.hpp"
#include "kernels/attention/sba/sba_internal.hpp"

namespace sb::cuda {
namespace {

constexpr int64_t kBlock = 64;  // the kernels' query and key blocks (Tp = 64 ceil(T / 64))

// The caller's workspace, or a stream-ordered allocation freed on scope exit.
struct Scratch {
  void* p = nullptr;
  bool owned = false;
  cudaStream_t s;
  Scratch(void* ws, size_t have, size_t need, cudaStream_t stream, const char* what) : p(ws), s(stream) {
    if (p && have < need) fail("{}: workspace of {} bytes is smaller than the {} required", what, have, need);
    if (!p) {
      CUDA_CHECK(cudaMallocAsync(&p, need, s));
      owned = true;
    }
  }
  ~Scratch() {
    if (owned) cudaFreeAsync(p, s);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

void check_call(const AttnDims& d, float scale, const char* what, std::initializer_list<const void*> tensors) {
  if (d.B < 1 || d.T < 1 || d.H < 1)
    fail("{}: bad shape (B, T, H, Dh) = ({}, {}, {}, {})", what, d.B, d.T, d.H, d.Dh);
  if (d.Dh != 16 && d.Dh != 32 && d.Dh != 64 && d.Dh != 128)
    fail("{}: head dim Dh = {} not supported (16, 32, 64 or 128)", what, d.Dh);
  const int64_t nb = (d.T + kBlock - 1) / kBlock;
  if (nb * d.B * d.H >= (int64_t{1} << 31))
    fail("{}: B * H * ceil(T / 64) = {} blocks is too many", what, nb * d.B * d.H);
  if (!(scale > 0.f) || !std::isfinite(scale)) fail("{}: scale = {} must be positive and finite", what, scale);
  for (const void* p : tensors) {  // read and written 16 bytes at a time
    if (!p) fail("{}: a tensor pointer is null", what);
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) fail("{}: tensors must be 16-byte aligned", what);
  }
}

detail::SbaParams params(const AttnDims& d, float scale, DType dt, bool remainder) {
  detail::SbaParams p;
  p.B = d.B, p.T = d.T, p.H = d.H, p.nb = static_cast<int>((d.T + kBlock - 1) / kBlock);
  p.scale = scale, p.bf16 = dt == DType::BF16, p.remainder = remainder;
  return p;
}

}  // namespace

void sba_attention_forward_cuda(void* out, const void* q, const void* k, const void* v, const AttnDims& d, float scale,
                                DType dt, bool remainder, cudaStream_t stream) {
  check_call(d, scale, "sba attention forward", {out, q, k, v});
  detail::SbaParams p = params(d, scale, dt, remainder);
  p.q = q, p.k = k, p.v = v, p.out = out;
  detail::launch_sba_fwd(p, d.Dh, stream);
}

size_t sba_attention_backward_workspace_bytes(const AttnDims& d) {
  const int64_t Tp = (d.T + kBlock - 1) / kBlock * kBlock;
  return static_cast<size_t>(2 * d.B * d.H * Tp * d.Dh) * sizeof(float);
}

void sba_attention_backward_cuda(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                 const void* v, const AttnDims& d, float scale, DType dt, bool remainder,
                                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const char* what = "sba attention backward";
  check_call(d, scale, what, {dq, dk, dv, dout, q, k, v});
  const size_t need = sba_attention_backward_workspace_bytes(d);
  const Scratch ws(workspace, workspace_bytes, need, stream, what);
  detail::SbaParams p = params(d, scale, dt, remainder);
  p.q = q, p.k = k, p.v = v, p.dout = dout, p.dq = dq;
  p.dk_acc = static_cast<float*>(ws.p);
  p.dv_acc = p.dk_acc + need / sizeof(float) / 2;
  CUDA_CHECK(cudaMemsetAsync(ws.p, 0, need, stream));
  detail::launch_sba_bwd(p, d.Dh, stream);
  const bool bf16 = dt == DType::BF16;
  detail::launch_acc_to_output(dk, p.dk_acc, d.B, d.T, d.H, d.Dh, 0, d.B * d.H, bf16, stream);
  detail::launch_acc_to_output(dv, p.dv_acc, d.B, d.T, d.H, d.Dh, 0, d.B * d.H, bf16, stream);
}

}  // namespace sb::cuda
