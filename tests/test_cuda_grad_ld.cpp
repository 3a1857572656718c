// test_cuda_grad_ld.cpp: the attention backward with a gradient row stride (AttnDims::grad_ld), which
// the GPU runner uses to put dq, dk, dv straight into the columns of the packed projections'
// gradient: the short kernels (PaTH and softmax, T <= 32) store bit for bit the dense call's values
// and touch nothing else; attention_backward_takes_grad_ld names exactly those shapes; other
// shapes and bad strides are errors. Skips without a device.
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_attention_test_util.hpp"
#include "kernels/attention/attention.hpp"

namespace sb::test {
namespace {

struct Shape {
  int64_t B, T, H, Dh;
};

// One forward, then the backward twice: into dense dq, dk, dv and into the columns [0, HD), [HD,
// 2 HD), [2 HD, 3 HD) of [B T, ld] rows filled with a marker (ld = 3 HD + 8). Every byte must match.
void check(bool path, const Shape& c, DType dt, bool gate, uint64_t seed) {
  const std::string what = std::string(path ? "path" : "softmax") + " (B,T,H,Dh)=(" + std::to_string(c.B) + "," +
                           std::to_string(c.T) + "," + std::to_string(c.H) + "," + std::to_string(c.Dh) + ") " +
                           cuda::dtype_name(dt) + (gate ? " gate" : "");
  SCOPED_TRACE(what);
  cuda::AttnDims d{c.B, c.T, c.H, c.Dh};
  ASSERT_TRUE(cuda::attention_backward_takes_grad_ld(path, d, dt)) << "a short shape";
  PathInputs in = make_inputs(c.B, c.T, c.H, c.Dh, gate, seed);
  Vec dout = randn(in.nx(), seed + 99);
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns()), esz = cuda::dtype_bytes(dt);
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout, dt);
  DeviceBytes w = upload_f32(in.w), beta = upload_f32(in.beta), logf = upload_f32(in.log_f);
  DeviceBytes out = poisoned(nx * esz), lse = poisoned(ns * 4), dw = poisoned(nx * 4), dbeta = poisoned(ns * 4);
  DeviceBytes dlogf = poisoned(ns * 4), dq = poisoned(nx * esz), dk = poisoned(nx * esz), dv = poisoned(nx * esz);
  const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
  const float* lf = gate ? logf.as<float>() : nullptr;
  if (path)
    cuda::path_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                      beta.as<float>(), lf, d, scale, dt, nullptr, 0, nullptr);
  else
    cuda::softmax_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), lf, d, scale, dt,
                                         nullptr, 0, nullptr);
  auto backward = [&](void* gq, void* gk, void* gv, const cuda::AttnDims& dd) {
    if (path)
      cuda::path_attention_backward_cuda(gq, gk, gv, dw.as<float>(), dbeta.as<float>(),
                                         gate ? dlogf.as<float>() : nullptr, dO.data(), q.data(), k.data(), v.data(),
                                         w.as<float>(), beta.as<float>(), lf, out.data(), lse.as<float>(), dd, scale,
                                         dt, nullptr, 0, nullptr);
    else
      cuda::softmax_attention_backward_cuda(gq, gk, gv, gate ? dlogf.as<float>() : nullptr, dO.data(), q.data(),
                                            k.data(), v.data(), lf, out.data(), lse.as<float>(), dd, scale, dt,
                                            nullptr, 0, nullptr);
  };
  backward(dq.data(), dk.data(), dv.data(), d);
  const int64_t HD = c.H * c.Dh, rows = c.B * c.T;
  cuda::AttnDims strided = d;
  strided.grad_ld = 3 * HD + 8;
  const size_t ld = static_cast<size_t>(strided.grad_ld), row_bytes = static_cast<size_t>(HD) * esz;
  std::vector<unsigned char> marker(static_cast<size_t>(rows) * ld * esz);
  for (size_t i = 0; i < marker.size(); ++i) marker[i] = static_cast<unsigned char>(i * 131u + 7u);
  DeviceBytes wide = cuda::to_device(marker);
  unsigned char* base = static_cast<unsigned char*>(wide.data());
  backward(base, base + row_bytes, base + 2 * row_bytes, strided);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = cuda::to_host<unsigned char>(wide, marker.size());
  const std::vector<unsigned char> dense[3] = {cuda::to_host<unsigned char>(dq, nx * esz),
                                               cuda::to_host<unsigned char>(dk, nx * esz),
                                               cuda::to_host<unsigned char>(dv, nx * esz)};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* row = got.data() + static_cast<size_t>(r) * ld * esz;
    for (int t = 0; t < 3; ++t)
      ASSERT_EQ(std::memcmp(row + t * row_bytes, dense[t].data() + static_cast<size_t>(r) * row_bytes, row_bytes), 0)
          << names[t] << " differs from the dense call's at row " << r;
    const size_t tail = static_cast<size_t>(r) * ld * esz + 3 * row_bytes;
    ASSERT_EQ(std::memcmp(got.data() + tail, marker.data() + tail, 8 * esz), 0)
        << "columns past 3 HD written, row " << r;
  }
}

TEST(CudaGradLd, ShortKernelsStoreTheDenseGradients) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device available: CUDA attention tests skipped";
  uint64_t seed = 5;
  for (bool path : {true, false})
    for (DType dt : {DType::BF16, DType::F32})
      for (const Shape& c : {Shape{2, 1, 3, 16}, Shape{2, 7, 3, 32}, Shape{3, 21, 2, 64}, Shape{2, 32, 4, 32}})
        for (bool gate : {false, true}) check(path, c, dt, gate, seed += 11);
}

// Only the short kernels take a stride; longer sequences and bad strides are one-line errors.
TEST(CudaGradLd, OtherShapesAndBadStridesAreErrors) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device available: CUDA attention tests skipped";
  const cuda::AttnDims longer{1, 33, 2, 32};
  EXPECT_FALSE(cuda::attention_backward_takes_grad_ld(true, longer, DType::BF16));
  EXPECT_FALSE(cuda::attention_backward_takes_grad_ld(false, longer, DType::BF16));
  EXPECT_FALSE(cuda::attention_backward_takes_grad_ld(false, cuda::AttnDims{1, 8, 2, 128}, DType::BF16));
  DeviceBytes buf = poisoned(1 << 20), small = poisoned(1 << 16);
  void* p = buf.data();
  float* f = small.as<float>();
  cuda::AttnDims d = longer;
  d.grad_ld = 3 * 64 + 8;
  auto softmax = [&](const cuda::AttnDims& dd) {
    cuda::softmax_attention_backward_cuda(p, p, p, nullptr, p, p, p, p, nullptr, p, f, dd, 0.5f, DType::BF16, nullptr,
                                          0, nullptr);
  };
  EXPECT_THROW(softmax(d), Error);
  EXPECT_THROW(cuda::path_attention_backward_cuda(p, p, p, f, f, nullptr, p, p, p, p, f, f, nullptr, p, f, d, 0.5f,
                                                  DType::BF16, nullptr, 0, nullptr),
               Error);
  cuda::AttnDims bad{1, 8, 2, 32};
  bad.grad_ld = 60;  // below H Dh
  EXPECT_THROW(softmax(bad), Error);
  bad.grad_ld = 68;  // not a multiple of 8
  EXPECT_THROW(softmax(bad), Error);
  try {
    softmax(bad);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grad_ld = 68"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sb::test
#else
TEST(CudaGradLd, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): grad_ld tests skipped";
}
#endif
