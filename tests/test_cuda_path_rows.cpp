// test_cuda_path_rows.cpp: parity of PaTH attention at selected query rows
// (path_attention_rows_forward_cuda / _backward_cuda) with the CPU reference run in double over the
// whole sequence (nn::path_attention_*, Blockwise form): the output and lse at the selected rows, and
// every whole-sequence gradient when dout is zero off those rows. Row patterns cover the first and
// last position, a sequence with none, and up to kPathRowsMaxPerSeq rows (a lane group each).
// Skips without CUDA or a device.
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_attention_test_util.hpp"
#include "kernels/attention/attention.hpp"
#include "nn/path_attention.hpp"
#include "path_test_util.hpp"

namespace sb::test {
namespace {

struct RowsCase {
  int64_t B, T, H, Dh;
  bool gate;
  int64_t per_seq;  // rows in sequences 0, 2, 3, ... (sequence 1 has none when B > 1)
  double beta_lo = 0.05, beta_hi = 1.95;
};

// Ascending positions of each sequence: 0 and T - 1 first, then random distinct ones.
std::vector<int32_t> pick_rows(const RowsCase& c, uint64_t seed, std::vector<int32_t>& starts) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> rows;
  starts.assign(c.B + 1, 0);
  for (int64_t b = 0; b < c.B; ++b) {
    std::vector<int32_t> pos;
    const int64_t want = b == 1 ? 0 : std::min(c.per_seq, c.T);
    if (want > 0) pos.push_back(0);
    if (want > 1) pos.push_back(static_cast<int32_t>(c.T - 1));
    while (static_cast<int64_t>(pos.size()) < want) {
      const auto t = static_cast<int32_t>(gen() % c.T);
      if (std::find(pos.begin(), pos.end(), t) == pos.end()) pos.push_back(t);
    }
    std::sort(pos.begin(), pos.end());
    for (int32_t t : pos) rows.push_back(static_cast<int32_t>(b * c.T + t));
    starts[b + 1] = static_cast<int32_t>(rows.size());
  }
  return rows;
}

void check_rows(const RowsCase& c, DType dt, uint64_t seed) {
  const std::string what = "(B,T,H,Dh)=(" + std::to_string(c.B) + "," + std::to_string(c.T) + "," +
                           std::to_string(c.H) + "," + std::to_string(c.Dh) + ") " + cuda::dtype_name(dt) +
                           (c.gate ? " gate" : "") + " rows/seq " + std::to_string(c.per_seq);
  SCOPED_TRACE(what);
  PathInputs in = make_inputs(c.B, c.T, c.H, c.Dh, c.gate, seed, c.beta_lo, c.beta_hi);
  std::vector<int32_t> starts;
  const std::vector<int32_t> rows = pick_rows(c, seed + 7, starts);
  const int64_t M = static_cast<int64_t>(rows.size()), H = c.H, Dh = c.Dh;
  // dout: random at the selected rows, zero elsewhere (what the rows tail's loss gives).
  Vec dout(in.nx(), 0.0), dout_rows(std::max<int64_t>(1, M) * H * Dh, 0.0);
  const Vec noise = randn(M * H * Dh, seed + 99);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t i = 0; i < H * Dh; ++i) dout_rows[r * H * Dh + i] = noise[r * H * Dh + i];
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns()), esz = cuda::dtype_bytes(dt);
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout_rows, dt);  // rounds dout_rows in place
  for (int64_t r = 0; r < M; ++r)
    for (int64_t i = 0; i < H * Dh; ++i) dout[rows[r] * H * Dh + i] = dout_rows[r * H * Dh + i];
  DeviceBytes w = upload_f32(in.w), beta = upload_f32(in.beta), logf = upload_f32(in.log_f);
  DeviceBytes d_rows = cuda::to_device(std::vector<int32_t>(rows.empty() ? std::vector<int32_t>{0} : rows));
  DeviceBytes d_starts = cuda::to_device(starts);
  const size_t nr = static_cast<size_t>(std::max<int64_t>(1, M));
  DeviceBytes out = poisoned(nr * H * Dh * esz), lse = poisoned(nr * H * 4);
  DeviceBytes dq = poisoned(nx * esz), dk = poisoned(nx * esz), dv = poisoned(nx * esz), dw = poisoned(nx * 4);
  DeviceBytes dbeta = poisoned(ns * 4), dlogf = poisoned(ns * 4);
  const cuda::AttnDims d{c.B, c.T, c.H, c.Dh};
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
  const float* lf = c.gate ? logf.as<float>() : nullptr;
  const int32_t* pr = d_rows.as<int32_t>();
  const int32_t* ps = d_starts.as<int32_t>();
  DeviceBytes ws = poisoned(cuda::path_attention_rows_workspace_bytes(d));  // the forward fills what the backward reads
  cuda::path_attention_rows_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                         beta.as<float>(), lf, pr, ps, M, d, static_cast<float>(scale), dt, ws.data(),
                                         ws.bytes(), nullptr);
  cuda::path_attention_rows_backward_cuda(dq.data(), dk.data(), dv.data(), dw.as<float>(), dbeta.as<float>(),
                                          c.gate ? dlogf.as<float>() : nullptr, dO.data(), out.data(), lse.as<float>(),
                                          q.data(), k.data(), v.data(), w.as<float>(), beta.as<float>(), lf, pr, ps, M, d,
                                          static_cast<float>(scale), dt, ws.data(), ws.bytes(), nullptr);
  // Without a workspace (no backward follows) the forward computes the same rows, bit for bit.
  DeviceBytes out2 = poisoned(nr * H * Dh * esz), lse2 = poisoned(nr * H * 4);
  cuda::path_attention_rows_forward_cuda(out2.data(), lse2.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                         beta.as<float>(), lf, pr, ps, M, d, static_cast<float>(scale), dt, nullptr, 0,
                                         nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto bytes_of = [](const DeviceBytes& b, int64_t n) {
    return cuda::to_host<uint8_t>(b, static_cast<size_t>(n));
  };
  if (M > 0) {
    EXPECT_EQ(bytes_of(out, M * H * Dh * esz), bytes_of(out2, M * H * Dh * esz)) << what << ": out without workspace";
    EXPECT_EQ(bytes_of(lse, M * H * 4), bytes_of(lse2, M * H * 4)) << what << ": lse without workspace";
  }

  // Reference: the whole sequence in double, outputs read at the rows.
  Vec r_out(nx), r_lse(ns), r_dq(nx, 0.0), r_dk(nx, 0.0), r_dv(nx, 0.0), r_dw(nx, 0.0), r_db(ns, 0.0), r_df(ns, 0.0);
  const double* rlf = c.gate ? in.log_f.data() : nullptr;
  const int64_t blk = nn::path_default_block(c.Dh);
  nn::path_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(),
                                     in.beta.data(), rlf, c.B, c.T, c.H, c.Dh, scale, nn::PathForm::Blockwise, blk,
                                     nullptr);
  nn::path_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), r_dw.data(), r_db.data(), r_df.data(),
                                      dout.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(), in.beta.data(),
                                      rlf, r_out.data(), r_lse.data(), c.B, c.T, c.H, c.Dh, scale,
                                      nn::PathForm::Blockwise, blk, nullptr);
  Vec ref_out(M * H * Dh), ref_lse(M * H);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t b = rows[r] / c.T, t = rows[r] % c.T;
      ref_lse[r * H + h] = r_lse[(b * H + h) * c.T + t];  // lse is [B, H, T]
      for (int64_t i = 0; i < Dh; ++i) ref_out[(r * H + h) * Dh + i] = r_out[(rows[r] * H + h) * Dh + i];
    }

  const Tol tol = tolerance(dt);
  int64_t bad = 0;
  std::vector<Checked> items;
  if (M > 0) {
    items.push_back({"out", download(out, M * H * Dh, dt, bad), &ref_out, tol.out});
    items.push_back({"lse", download(lse, M * H, DType::F32, bad), &ref_lse, tol.lse});
  }
  items.push_back({"dq", download(dq, nx, dt, bad), &r_dq, tol.grad});
  items.push_back({"dk", download(dk, nx, dt, bad), &r_dk, tol.grad});
  items.push_back({"dv", download(dv, nx, dt, bad), &r_dv, tol.grad});
  items.push_back({"dw", download(dw, nx, DType::F32, bad), &r_dw, tol.grad});
  items.push_back({"dbeta", download(dbeta, ns, DType::F32, bad), &r_db, tol.grad});
  if (c.gate) items.push_back({"dlog_f", download(dlogf, ns, DType::F32, bad), &r_df, tol.grad});
  EXPECT_EQ(bad, 0) << "outputs left unwritten (poison) or non-finite";
  expect_close(items, "PaTH rows " + what);
}

const std::vector<RowsCase>& rows_cases() {
  static const std::vector<RowsCase> cases = {
      {1, 1, 1, 16, true, 1},       {2, 7, 3, 32, false, 3},       {3, 113, 2, 64, true, 32},
      {2, 257, 2, 128, false, 5},   {3, 200, 1, 128, true, 32, 1.9, 1.999},
      {4, 64, 2, 16, true, 17},     {1, 1000, 1, 64, true, 32},    {2, 33, 1, 32, true, 31, 1.9, 1.999},
  };
  return cases;
}

TEST(CudaPathRows, MatchesDoubleCpuFp32) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 11;
  for (const RowsCase& c : rows_cases()) check_rows(c, DType::F32, seed++);
}

TEST(CudaPathRows, MatchesDoubleCpuBf16) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 41;
  for (const RowsCase& c : rows_cases()) check_rows(c, DType::BF16, seed++);
}

TEST(CudaPathRows, RejectsBadArguments) {
  SKIP_WITHOUT_DEVICE();
  const cuda::AttnDims d{1, 8, 1, 16};
  DeviceBytes buf(4096), ws(16);
  const float* f = buf.as<float>();
  const int32_t* i = buf.as<int32_t>();
  float* o = buf.as<float>();
  auto backward = [&](void* w, size_t bytes, const float* log_f, float* dlog_f) {
    cuda::path_attention_rows_backward_cuda(o, o, o, o, o, dlog_f, f, f, f, f, f, f, f, f, log_f, i, i, 1, d, 1.f,
                                            DType::F32, w, bytes, nullptr);
  };
  EXPECT_THROW(backward(ws.data(), ws.bytes(), nullptr, nullptr), Error);  // workspace too small
  EXPECT_THROW(backward(nullptr, 0, nullptr, nullptr), Error);            // no workspace
  EXPECT_THROW(backward(buf.data(), buf.bytes(), f, nullptr), Error);      // gate without dlog_f
  auto forward = [&](int64_t M, void* w, size_t bytes) {
    cuda::path_attention_rows_forward_cuda(o, o, f, f, f, f, f, nullptr, i, i, M, d, 1.f, DType::F32, w, bytes,
                                           nullptr);
  };
  EXPECT_THROW(forward(-1, nullptr, 0), Error);            // negative row count
  EXPECT_THROW(forward(1, ws.data(), ws.bytes()), Error);  // workspace too small
}

}  // namespace
}  // namespace sb::test
#else
TEST(CudaPathRows, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): PaTH rows tests skipped";
}
#endif
