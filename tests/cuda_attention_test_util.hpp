// cuda_attention_test_util.hpp: what the CUDA attention parity tests share: tolerances per
// precision, bf16 rounding, uploads of inputs rounded to what the device sees, poisoned outputs,
// downloads that count non-finite values, and the norm-wise relative error.
#pragma once
#ifdef STATEBENCH_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/common/device_buffer.hpp"
#include "path_test_util.hpp"

namespace sb::test {

using cuda::AttentionOptions;
using cuda::DeviceBytes;
using cuda::DType;

// Norm-wise relative error tolerances ||gpu - ref|| / ||ref|| against a float64 reference on the
// same (rounded) inputs.
// fp32: every tensor-core product splits its operands (hi + lo bf16, three products), ~2^-16
//   relative per product, far below 1e-4 on outputs; gradients add recomputation and atomics
//   order (fp32 sums) and are held to 1e-3.
// bf16: inputs are exact bf16, but derived operands (probabilities, pushed keys, dS, transported
//   queries in the score products) are rounded to bf16 (2^-9 relative), so errors of a few 1e-3
//   are expected; 1e-2 for outputs and 2e-2 for gradients (the w / beta gradients sum many such
//   rounded terms).
struct Tol {
  double out, lse, grad;
};
inline Tol tolerance(DType dt) { return dt == DType::F32 ? Tol{1e-4, 1e-4, 1e-3} : Tol{1e-2, 1e-3, 2e-2}; }

inline bool have_device() { return cuda::cuda_device_available(); }
#define SKIP_WITHOUT_DEVICE() \
  if (!have_device()) GTEST_SKIP() << "no CUDA device available: CUDA attention tests skipped"

inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite)
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Rounds x in place to what the device sees (float or bf16) and returns the device bytes.
inline DeviceBytes upload_rounded(Vec& x, DType dt) {
  if (dt == DType::BF16) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = bf16_bits(static_cast<float>(x[i]));
      x[i] = bf16_value(h[i]);
    }
    return cuda::to_device(h);
  }
  std::vector<float> f(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = f[i] = static_cast<float>(x[i]);
  return cuda::to_device(f);
}
inline DeviceBytes upload_f32(Vec& x) { return upload_rounded(x, DType::F32); }

// Downloads n elements; counts non-finite values (the poison 0xFF.. is NaN in both types).
inline Vec download(const DeviceBytes& buf, size_t n, DType dt, int64_t& nonfinite) {
  Vec out(n);
  if (dt == DType::BF16) {
    const auto h = cuda::to_host<uint16_t>(buf, n);
    for (size_t i = 0; i < n; ++i) out[i] = bf16_value(h[i]);
  } else {
    const auto f = cuda::to_host<float>(buf, n);
    for (size_t i = 0; i < n; ++i) out[i] = f[i];
  }
  for (double x : out) nonfinite += !std::isfinite(x);
  return out;
}

inline DeviceBytes poisoned(size_t bytes) {
  DeviceBytes b(bytes);
  b.fill_bytes(0xFF);
  return b;
}

// ||got - ref|| / max(||ref||, 1e-2 sqrt(n)): relative, except that a reference whose RMS is
// below 1e-2 is compared absolutely (at T = 1 the exact dq and dk are 0 since out = v makes
// dS = 0; the device returns a cancellation residue ~1e-5 there). Real gradients here have RMS
// ~0.1 - 1, so the floor never applies to them.
inline double rel_err(const Vec& got, const Vec& ref) {
  double d = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    d += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(r), 1e-2 * std::sqrt(static_cast<double>(ref.size())));
}

// One compared output: its name, what the device gave, the reference and the tolerance.
struct Checked {
  const char* name;
  Vec got;
  const Vec* ref;
  double tol;
};
// Expects each output within its tolerance (relative error, rel_err) and prints one line:
// "<label>: name error ...".
inline void expect_close(const std::vector<Checked>& items, const std::string& label) {
  std::string line = label + ":";
  for (const Checked& it : items) {
    const double e = rel_err(it.got, *it.ref);
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.2e", it.name, e);
    line += buf;
    EXPECT_LE(e, it.tol) << it.name << " relative error";
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace sb::test
#endif
