// test_cuda_attention_strides.cpp: attention with row strides (AttnDims::qkv_ld, grad_ld), which the
// GPU runner uses to read q, k, v from one [N, 3 HD] product and to store dq, dk, dv straight into
// the packed projections' gradient: the short kernels (PaTH and softmax, T <= 32) read and write
// bit for bit what the dense call does and touch nothing else; attention_takes_strides names exactly
// those shapes; other shapes and bad strides are errors. Skips without a device.
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

// Rows of a [rows, ld] matrix of esz-byte elements filled with a marker, with three [rows, cols]
// tensors' rows copied into its columns [0, cols), [cols, 2 cols), [2 cols, 3 cols).
std::vector<unsigned char> side_by_side(const std::vector<unsigned char>* parts, int64_t rows, int64_t cols,
                                        int64_t ld, size_t esz) {
  std::vector<unsigned char> m(static_cast<size_t>(rows * ld) * esz);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<unsigned char>(i * 131u + 7u);
  const size_t row = static_cast<size_t>(cols) * esz;
  for (int64_t r = 0; r < rows; ++r)
    for (int t = 0; t < 3; ++t)
      std::memcpy(m.data() + (static_cast<size_t>(r * ld) * esz + t * row), parts[t].data() + r * row, row);
  return m;
}

// One forward + backward on dense tensors, then again with q, k, v read from the columns of one
// [B T, 3 HD + 8] matrix (qkv_ld) and dq, dk, dv stored into another's (grad_ld); every byte of every
// output must match, and the gradient matrix's other bytes keep their marker.
void check(bool path, const Shape& c, DType dt, bool gate, uint64_t seed) {
  const std::string what = std::string(path ? "path" : "softmax") + " (B,T,H,Dh)=(" + std::to_string(c.B) + "," +
                           std::to_string(c.T) + "," + std::to_string(c.H) + "," + std::to_string(c.Dh) + ") " +
                           cuda::dtype_name(dt) + (gate ? " gate" : "");
  SCOPED_TRACE(what);
  const cuda::AttnDims d{c.B, c.T, c.H, c.Dh};
  ASSERT_TRUE(cuda::attention_takes_strides(path, d, dt)) << "a short shape";
  PathInputs in = make_inputs(c.B, c.T, c.H, c.Dh, gate, seed);
  Vec dout = randn(in.nx(), seed + 99);
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns()), esz = cuda::dtype_bytes(dt);
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout, dt);
  DeviceBytes w = upload_f32(in.w), beta = upload_f32(in.beta), logf = upload_f32(in.log_f);
  const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
  const float* lf = gate ? logf.as<float>() : nullptr;
  struct Outputs {
    DeviceBytes out, lse, dw, dbeta, dlogf;
  };
  auto run = [&](Outputs& r, const void* q_, const void* k_, const void* v_, void* gq, void* gk, void* gv,
                 const cuda::AttnDims& dd) {
    r.out = poisoned(nx * esz), r.lse = poisoned(ns * 4), r.dw = poisoned(nx * 4), r.dbeta = poisoned(ns * 4);
    r.dlogf = poisoned(ns * 4);
    if (path) {
      cuda::path_attention_forward_cuda(r.out.data(), r.lse.as<float>(), q_, k_, v_, w.as<float>(), beta.as<float>(),
                                        lf, dd, scale, dt, nullptr, 0, nullptr);
      cuda::path_attention_backward_cuda(gq, gk, gv, r.dw.as<float>(), r.dbeta.as<float>(),
                                         gate ? r.dlogf.as<float>() : nullptr, dO.data(), q_, k_, v_, w.as<float>(),
                                         beta.as<float>(), lf, r.out.data(), r.lse.as<float>(), dd, scale, dt,
                                         nullptr, 0, nullptr);
    } else {
      cuda::softmax_attention_forward_cuda(r.out.data(), r.lse.as<float>(), q_, k_, v_, lf, dd, scale, dt, nullptr, 0,
                                           nullptr);
      cuda::softmax_attention_backward_cuda(gq, gk, gv, gate ? r.dlogf.as<float>() : nullptr, dO.data(), q_, k_, v_,
                                            lf, r.out.data(), r.lse.as<float>(), dd, scale, dt, nullptr, 0, nullptr);
    }
  };
  Outputs dense, strided;
  DeviceBytes dq = poisoned(nx * esz), dk = poisoned(nx * esz), dv = poisoned(nx * esz);
  run(dense, q.data(), k.data(), v.data(), dq.data(), dk.data(), dv.data(), d);

  const int64_t HD = c.H * c.Dh, rows = c.B * c.T, ld = 3 * HD + 8;
  const size_t row_bytes = static_cast<size_t>(HD) * esz;
  const std::vector<unsigned char> inputs[3] = {cuda::to_host<unsigned char>(q, nx * esz),
                                                cuda::to_host<unsigned char>(k, nx * esz),
                                                cuda::to_host<unsigned char>(v, nx * esz)};
  DeviceBytes qkv = cuda::to_device(side_by_side(inputs, rows, HD, ld, esz));
  const std::vector<unsigned char> marker(static_cast<size_t>(rows * ld) * esz, 0x5a);
  DeviceBytes grads = cuda::to_device(marker);
  const auto* in_base = static_cast<const unsigned char*>(qkv.data());
  auto* g_base = static_cast<unsigned char*>(grads.data());
  cuda::AttnDims sd = d;
  sd.qkv_ld = ld, sd.grad_ld = ld;
  run(strided, in_base, in_base + row_bytes, in_base + 2 * row_bytes, g_base, g_base + row_bytes,
      g_base + 2 * row_bytes, sd);
  CUDA_CHECK(cudaDeviceSynchronize());

  auto same = [&](const DeviceBytes& a, const DeviceBytes& b, size_t bytes, const char* name) {
    EXPECT_EQ(cuda::to_host<unsigned char>(a, bytes), cuda::to_host<unsigned char>(b, bytes)) << name;
  };
  same(dense.out, strided.out, nx * esz, "out");
  same(dense.lse, strided.lse, ns * 4, "lse");
  if (path) same(dense.dw, strided.dw, nx * 4, "dw"), same(dense.dbeta, strided.dbeta, ns * 4, "dbeta");
  if (gate) same(dense.dlogf, strided.dlogf, ns * 4, "dlog_f");
  const std::vector<unsigned char> want_grads[3] = {cuda::to_host<unsigned char>(dq, nx * esz),
                                                    cuda::to_host<unsigned char>(dk, nx * esz),
                                                    cuda::to_host<unsigned char>(dv, nx * esz)};
  const auto got = cuda::to_host<unsigned char>(grads, marker.size());
  auto want = side_by_side(want_grads, rows, HD, ld, esz);
  for (int64_t r = 0; r < rows; ++r)  // the columns past 3 HD keep the marker
    std::memset(want.data() + static_cast<size_t>(r * ld) * esz + 3 * row_bytes, 0x5a, 8 * esz);
  EXPECT_TRUE(got == want) << "dq, dk, dv differ from the dense call's, or bytes past them were written";
}

TEST(CudaAttentionStrides, ShortKernelsReadAndWriteLikeTheDenseCall) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device available: CUDA attention tests skipped";
  uint64_t seed = 5;
  for (bool path : {true, false})
    for (DType dt : {DType::BF16, DType::F32})
      for (const Shape& c : {Shape{2, 1, 3, 16}, Shape{2, 7, 3, 32}, Shape{3, 21, 2, 64}, Shape{2, 32, 4, 32}})
        for (bool gate : {false, true}) check(path, c, dt, gate, seed += 11);
}

// Only the short kernels take strides; longer sequences and bad strides are one-line errors.
TEST(CudaAttentionStrides, OtherShapesAndBadStridesAreErrors) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device available: CUDA attention tests skipped";
  const cuda::AttnDims longer{1, 33, 2, 32};
  EXPECT_FALSE(cuda::attention_takes_strides(true, longer, DType::BF16));
  EXPECT_FALSE(cuda::attention_takes_strides(false, longer, DType::BF16));
  EXPECT_FALSE(cuda::attention_takes_strides(false, cuda::AttnDims{1, 8, 2, 128}, DType::BF16));
  DeviceBytes buf = poisoned(1 << 20), small = poisoned(1 << 16);
  void* p = buf.data();
  float* f = small.as<float>();
  auto softmax_bwd = [&](const cuda::AttnDims& dd) {
    cuda::softmax_attention_backward_cuda(p, p, p, nullptr, p, p, p, p, nullptr, p, f, dd, 0.5f, DType::BF16, nullptr,
                                          0, nullptr);
  };
  auto softmax_fwd = [&](const cuda::AttnDims& dd) {
    cuda::softmax_attention_forward_cuda(p, f, p, p, p, nullptr, dd, 0.5f, DType::BF16, nullptr, 0, nullptr);
  };
  cuda::AttnDims d = longer;
  d.grad_ld = 3 * 64 + 8;
  EXPECT_THROW(softmax_bwd(d), Error);
  EXPECT_THROW(cuda::path_attention_backward_cuda(p, p, p, f, f, nullptr, p, p, p, p, f, f, nullptr, p, f, d, 0.5f,
                                                  DType::BF16, nullptr, 0, nullptr),
               Error);
  d.grad_ld = 0, d.qkv_ld = 3 * 64;
  EXPECT_THROW(softmax_fwd(d), Error);
  EXPECT_THROW(cuda::path_attention_forward_cuda(p, f, p, p, p, f, f, nullptr, d, 0.5f, DType::BF16, nullptr, 0,
                                                 nullptr),
               Error);
  cuda::AttnDims bad{1, 8, 2, 32};
  bad.grad_ld = 60;  // below H Dh
  EXPECT_THROW(softmax_bwd(bad), Error);
  bad.grad_ld = 0, bad.qkv_ld = 68;  // not a multiple of 8
  try {
    softmax_fwd(bad);
    ADD_FAILURE() << "qkv_ld = 68 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qkv_ld = 68"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sb::test
#else
TEST(CudaAttentionStrides, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): stride tests skipped";
}
#endif
