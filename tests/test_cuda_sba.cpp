// test_cuda_sba.cpp: parity of the CUDA stick-breaking attention (kernels/attention/sba/) with the
// CPU reference in double (nn::sba_attention_*): output and every gradient over awkward shapes
// (T = 1 .. 1000, Dh 16 - 128, many small heads), with and without the remainder, fp32 and bf16,
// outputs and workspace poisoned; scores biased low for long look-backs; argument errors. Skips
// without CUDA or a device.
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_attention_test_util.hpp"
#include "kernels/attention/attention.hpp"
#include "nn/ops_sba.hpp"

namespace sb::test {
namespace {

struct SbaCase {
  int64_t B, T, H, Dh;
  double mu = 0;  // mean score: 0 for q, k ~ N(0, 1); negative: small betas, long look-back
};
std::string describe(const SbaCase& s, DType dt, bool rem) {
  return "(B,T,H,Dh)=(" + std::to_string(s.B) + "," + std::to_string(s.T) + "," + std::to_string(s.H) + "," +
         std::to_string(s.Dh) + ") " + cuda::dtype_name(dt) + (rem ? " remainder" : " no remainder") +
         " mu=" + std::to_string(s.mu);
}

// One forward + backward on the device and in double on the CPU (on the rounded inputs).
void check_sba(const SbaCase& s, DType dt, bool rem, uint64_t seed, bool caller_workspace = true) {
  SCOPED_TRACE(describe(s, dt, rem));
  const int64_t n = s.B * s.T * s.H * s.Dh;
  Vec q = randn(n, seed), k = randn(n, seed + 1), v = randn(n, seed + 2), dout = randn(n, seed + 3);
  if (s.mu != 0)  // channel 0 carries the bias: z ~ mu + N(0, 0.09 / ...) per score
    for (int64_t r = 0; r < s.B * s.T * s.H; ++r) {
      for (int64_t c = 1; c < s.Dh; ++c) q[r * s.Dh + c] *= 0.3, k[r * s.Dh + c] *= 0.3;
      q[r * s.Dh] = 1.0 + 0.1 * q[r * s.Dh];
      k[r * s.Dh] = s.mu * std::sqrt(static_cast<double>(s.Dh));
    }
  const size_t esz = cuda::dtype_bytes(dt);
  DeviceBytes dq_ = upload_rounded(q, dt), dk_ = upload_rounded(k, dt), dv_ = upload_rounded(v, dt);
  DeviceBytes dO = upload_rounded(dout, dt);
  DeviceBytes out = poisoned(n * esz), gq = poisoned(n * esz), gk = poisoned(n * esz), gv = poisoned(n * esz);
  const cuda::AttnDims d{s.B, s.T, s.H, s.Dh};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.Dh));
  DeviceBytes ws;
  if (caller_workspace) ws = poisoned(cuda::sba_attention_backward_workspace_bytes(d));
  cuda::sba_attention_forward_cuda(out.data(), dq_.data(), dk_.data(), dv_.data(), d, static_cast<float>(scale), dt,
                                   rem, nullptr);
  cuda::sba_attention_backward_cuda(gq.data(), gk.data(), gv.data(), dO.data(), dq_.data(), dk_.data(), dv_.data(), d,
                                    static_cast<float>(scale), dt, rem, ws.data(), ws.bytes(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());

  Vec r_out(n), r_dq(n, 0.0), r_dk(n, 0.0), r_dv(n, 0.0);
  nn::sba_attention_forward<double>(r_out.data(), q.data(), k.data(), v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
  nn::sba_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), dout.data(), q.data(), k.data(),
                                     v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
  const Tol tol = tolerance(dt);
  int64_t bad = 0;
  std::vector<Checked> items;
  items.push_back({"out", download(out, n, dt, bad), &r_out, tol.out});
  items.push_back({"dq", download(gq, n, dt, bad), &r_dq, tol.grad});
  items.push_back({"dk", download(gk, n, dt, bad), &r_dk, tol.grad});
  items.push_back({"dv", download(gv, n, dt, bad), &r_dv, tol.grad});
  EXPECT_EQ(bad, 0) << "outputs left unwritten (poison) or non-finite";
  expect_close(items, "sba " + describe(s, dt, rem));
}

const std::vector<SbaCase>& shapes() {
  static const std::vector<SbaCase> cases = {
      {1, 1, 1, 16},    {2, 7, 3, 32},   {1, 64, 2, 64},   {1, 113, 1, 128}, {2, 257, 2, 16},
      {1, 257, 1, 128}, {1, 1000, 1, 64}, {512, 7, 8, 32}, {64, 64, 4, 16},   {3, 113, 5, 64},
      {16, 129, 2, 32}, {1, 7, 2, 128},
  };
  return cases;
}

TEST(CudaSba, Fp32) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 100;
  for (const SbaCase& s : shapes())
    for (bool rem : {true, false}) check_sba(s, DType::F32, rem, seed += 10);
}

TEST(CudaSba, Bf16) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 500;
  for (const SbaCase& s : shapes())
    for (bool rem : {true, false}) check_sba(s, DType::BF16, rem, seed += 10);
}

// Scores around -5 (beta ~ 0.007): each query's stick lasts for hundreds of keys, so the walks
// cross many key blocks before stopping (with mean-zero scores they stop after about 60 keys);
// and a case without the caller's workspace (stream-ordered allocation).
TEST(CudaSba, LongLookBack) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<SbaCase> cases = {{1, 1000, 1, 64, -5.0}, {2, 300, 2, 128, -4.0}, {4, 257, 2, 16, -6.0},
                                      {1, 1000, 2, 32, -3.0}};
  uint64_t seed = 900;
  for (const SbaCase& s : cases)
    for (DType dt : {DType::F32, DType::BF16})
      for (bool rem : {true, false}) check_sba(s, dt, rem, seed += 10, dt == DType::F32);
}

TEST(CudaSba, RejectsBadArguments) {
  SKIP_WITHOUT_DEVICE();
  const cuda::AttnDims d{1, 8, 1, 32};
  DeviceBytes buf(8 * 32 * 4);
  void* p = buf.data();
  EXPECT_THROW(cuda::sba_attention_forward_cuda(p, p, p, p, {1, 8, 1, 48}, 0.1f, DType::F32, true, nullptr), Error);
  EXPECT_THROW(cuda::sba_attention_forward_cuda(p, nullptr, p, p, d, 0.1f, DType::F32, true, nullptr), Error);
  EXPECT_THROW(cuda::sba_attention_forward_cuda(p, p, p, p, d, 0.f, DType::F32, true, nullptr), Error);
  DeviceBytes small(16);
  EXPECT_THROW(cuda::sba_attention_backward_cuda(p, p, p, p, p, p, p, d, 0.1f, DType::F32, true, small.data(),
                                                 small.bytes(), nullptr),
               Error);
  EXPECT_EQ(cuda::sba_attention_backward_workspace_bytes(d), size_t{2 * 64 * 32 * 4});
}

}  // namespace
}  // namespace sb::test
#else
TEST(CudaSba, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#endif
