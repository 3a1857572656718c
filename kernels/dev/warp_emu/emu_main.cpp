// emu_main.cpp: the short warp kernels run on the CPU (run.sh generates kernel_emu.inc from their
// source; shim.hpp stands in for the device) against the double CPU references (PaTH:
// nn::path_attention_*, Blockwise; softmax: nn::softmax_attention_*), every output and gradient with
// the parity tests' tolerances (tests/cuda_attention_test_util.hpp), at the shapes of
// tests/test_cuda_path_short.cpp and tests/test_cuda_attention.cpp's short softmax grid; PaTH's
// backward from the forward's kept Tinv and Z must equal the one that solves again, bit for bit.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "kernel_emu.inc"
// One launch: its CTAs in turn, each a thread per lane of its warps (two, or `threads` / 32) with the
// CTA's shared memory (NaN-filled).
template <class K, class A>
void emu_launch(K kernel, int64_t floats, A a, int64_t ctas, int threads = kThreads) {
  for (int64_t b = 0; b < ctas; ++b) {
    std::vector<float> shm(floats, NAN);
    std::barrier<> cta(threads);
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    std::vector<std::vector<double>> xchg(threads / 32, std::vector<double>(32));
    std::vector<std::vector<float>> frag(threads / 32, std::vector<float>(32 * 6));
    std::vector<std::vector<const float*>> rows(threads / 32, std::vector<const float*>(32));
    for (int w = 0; w < threads / 32; ++w) bars.emplace_back(new std::barrier<>(32));
    std::vector<std::thread> th;
    for (int t = 0; t < threads; ++t)
      th.emplace_back([&, t] {
        emu::t_thread = {static_cast<unsigned>(t), 0, 0};
        emu::t_block = {static_cast<unsigned>(b), 0, 0};
        emu::t_smem = shm.data();
        emu::t_bar = bars[t / 32].get();
        emu::t_cta_bar = &cta;
        emu::t_xchg = xchg[t / 32].data();
        emu::t_frag = frag[t / 32].data();
        emu::t_rows = rows[t / 32].data();
        kernel(a);
      });
    for (auto& x : th) x.join();
  }
}
}  // namespace
void emu_fwd(void* out, float* lse, const void* q, const void* k, const void* v, const float* w, const float* beta,
             const float* log_f, const AttnDims& d, float scale, bool bf16, float* kept) {
  WarpArgs a{};
  a.kept = kept;
  a.T = d.T, a.H = d.H, a.BH = d.B * d.H, a.scale = scale, a.is = d.H * d.Dh;
  a.q = q, a.k = k, a.v = v, a.w = w, a.beta = beta, a.log_f = log_f, a.out = out, a.lse = lse;
  auto go = [&](auto kernel, int64_t floats) { emu_launch(kernel, floats, a, a.BH); };
  switch (d.Dh) {
    case 16: go(bf16 ? path_short_warp_fwd_kernel<16, true> : path_short_warp_fwd_kernel<16, false>, path_short_warp_layout(16).fwd_floats); break;
    case 32: go(bf16 ? path_short_warp_fwd_kernel<32, true> : path_short_warp_fwd_kernel<32, false>, path_short_warp_layout(32).fwd_floats); break;
    case 64: go(bf16 ? path_short_warp_fwd_kernel<64, true> : path_short_warp_fwd_kernel<64, false>, path_short_warp_layout(64).fwd_floats); break;
  }
}
void emu_bwd(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f, const void* dout, const void* q,
             const void* k, const void* v, const float* w, const float* beta, const float* log_f, const float* lse,
             const AttnDims& d, float scale, bool bf16, float* kept) {
  WarpArgs a{};
  a.kept = kept;
  a.T = d.T, a.H = d.H, a.BH = d.B * d.H, a.scale = scale, a.is = d.H * d.Dh, a.gs = d.H * d.Dh;
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.w = w, a.beta = beta, a.log_f = log_f, a.lse_in = lse;
  a.dq = dq, a.dk = dk, a.dv = dv, a.dw = dw, a.dbeta = dbeta, a.dlog_f = log_f ? dlog_f : nullptr;
  auto go = [&](auto kernel, int64_t floats) { emu_launch(kernel, floats, a, a.BH); };
  switch (d.Dh) {
    case 16: go(bf16 ? path_short_warp_bwd_kernel<16, true> : path_short_warp_bwd_kernel<16, false>, path_short_warp_layout(16).bwd_floats); break;
    case 32: go(bf16 ? path_short_warp_bwd_kernel<32, true> : path_short_warp_bwd_kernel<32, false>, path_short_warp_layout(32).bwd_floats); break;
    case 64: go(bf16 ? path_short_warp_bwd_kernel<64, true> : path_short_warp_bwd_kernel<64, false>, path_short_warp_layout(64).bwd_floats); break;
  }
}
// bf16 softmax: softmax_short_bf16_sm80.cu's kernels, a warp a head and kWarpHeads heads a CTA.
template <class K>
void emu_bf16_launch(K kernel, int elements, const Bf16ShortArgs& a) {
  emu_launch(kernel, cta_bytes(elements) / 4, a, (a.BH + kWarpHeads - 1) / kWarpHeads, kWarpCta);
}
void emu_softmax_bf16_fwd(void* out, float* lse, const void* q, const void* k, const void* v, const float* log_f,
                          const float* rope_cs, const AttnDims& d, float scale) {
  Bf16ShortArgs a;
  a.BH = d.B * d.H, a.T = d.T, a.H = d.H, a.scale = scale, a.is = d.H * d.Dh;
  a.q = q, a.k = k, a.v = v, a.log_f = log_f, a.out = out, a.lse = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  switch (d.Dh) {
    case 16: emu_bf16_launch(softmax_short_bf16_fwd_kernel<16>, warp_tiles(16).fwd, a); break;
    case 32: emu_bf16_launch(softmax_short_bf16_fwd_kernel<32>, warp_tiles(32).fwd, a); break;
    case 64: emu_bf16_launch(softmax_short_bf16_fwd_kernel<64>, warp_tiles(64).fwd, a); break;
  }
}
void emu_softmax_bf16_bwd(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q, const void* k,
                          const void* v, const float* log_f, const float* rope_cs, const float* lse, const AttnDims& d,
                          float scale) {
  Bf16ShortArgs a;
  a.BH = d.B * d.H, a.T = d.T, a.H = d.H, a.scale = scale, a.is = d.H * d.Dh, a.gs = d.H * d.Dh;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.log_f = log_f, a.lse_in = lse;
  a.dq = dq, a.dk = dk, a.dv = dv, a.dlog_f = log_f ? dlog_f : nullptr;
  switch (d.Dh) {
    case 16: emu_bf16_launch(softmax_short_bf16_bwd_kernel<16>, warp_tiles(16).bwd, a); break;
    case 32: emu_bf16_launch(softmax_short_bf16_bwd_kernel<32>, warp_tiles(32).bwd, a); break;
    case 64: emu_bf16_launch(softmax_short_bf16_bwd_kernel<64>, warp_tiles(64).bwd, a); break;
  }
}
void emu_softmax_fwd(void* out, float* lse, const void* q, const void* k, const void* v, const float* log_f,
                     const float* rope_cs, const AttnDims& d, float scale, bool bf16) {
  if (bf16) return emu_softmax_bf16_fwd(out, lse, q, k, v, log_f, rope_cs, d, scale);
  SoftmaxShortArgs a;
  a.T = d.T, a.H = d.H, a.scale = scale, a.is = d.H * d.Dh;
  a.q = q, a.k = k, a.v = v, a.log_f = log_f, a.out = out, a.lse = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  auto go = [&](auto kernel, int64_t floats) { emu_launch(kernel, floats, a, d.B * d.H); };
  switch (d.Dh) {
    case 16: go(softmax_short_warp_fwd_kernel<16>, layout(16).fwd_floats); break;
    case 32: go(softmax_short_warp_fwd_kernel<32>, layout(32).fwd_floats); break;
    case 64: go(softmax_short_warp_fwd_kernel<64>, layout(64).fwd_floats); break;
  }
}
void emu_softmax_bwd(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q, const void* k,
                     const void* v, const float* log_f, const float* rope_cs, const float* lse, const AttnDims& d,
                     float scale, bool bf16) {
  if (bf16) return emu_softmax_bf16_bwd(dq, dk, dv, dlog_f, dout, q, k, v, log_f, rope_cs, lse, d, scale);
  SoftmaxShortArgs a;
  a.T = d.T, a.H = d.H, a.scale = scale, a.is = d.H * d.Dh, a.gs = d.H * d.Dh;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.log_f = log_f, a.lse_in = lse;
  a.dq = dq, a.dk = dk, a.dv = dv, a.dlog_f = log_f ? dlog_f : nullptr;
  auto go = [&](auto kernel, int64_t floats) { emu_launch(kernel, floats, a, d.B * d.H); };
  switch (d.Dh) {
    case 16: go(softmax_short_warp_bwd_kernel<16>, layout(16).bwd_floats); break;
    case 32: go(softmax_short_warp_bwd_kernel<32>, layout(32).bwd_floats); break;
    case 64: go(softmax_short_warp_bwd_kernel<64>, layout(64).bwd_floats); break;
  }
}
}  // namespace sb::cuda::detail

#include "nn/ops_attention.hpp"
#include "nn/path_attention.hpp"
#include "path_test_util.hpp"

namespace {
using sb::test::Vec;
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
struct Buf {
  std::vector<float> f;
  std::vector<uint16_t> h;
  void* p(bool bf) { return bf ? static_cast<void*>(h.data()) : static_cast<void*>(f.data()); }
};
Buf up(Vec& x, bool bf) {  // rounds x in place to what the kernel sees
  Buf b;
  if (bf) {
    b.h.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) b.h[i] = bf16_bits(static_cast<float>(x[i])), x[i] = bf16_value(b.h[i]);
  } else {
    b.f.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = b.f[i] = static_cast<float>(x[i]);
  }
  return b;
}
Buf out_buf(size_t n, bool bf) {
  Buf b;
  if (bf) b.h.assign(n, 0xFFFF); else b.f.assign(n, NAN);
  return b;
}
Vec down(Buf& b, size_t n, bool bf, int64_t& bad) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf ? bf16_value(b.h[i]) : b.f[i], bad += !std::isfinite(v[i]);
  return v;
}
double rel_err(const Vec& got, const Vec& ref) {
  double d = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) d += (got[i] - ref[i]) * (got[i] - ref[i]), r += ref[i] * ref[i];
  return std::sqrt(d) / std::max(std::sqrt(r), 1e-2 * std::sqrt(static_cast<double>(ref.size())));
}
int failures = 0;
// FNV-1a over the outputs' bytes: a change that should keep the arithmetic keeps every case's digest.
struct Digest {
  uint64_t h = 1469598103934665603ull;
  Digest& operator<<(const Buf& b) {
    auto add = [&](const void* p, size_t n) {
      for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
    };
    add(b.f.data(), b.f.size() * sizeof(float)), add(b.h.data(), b.h.size() * sizeof(uint16_t));
    return *this;
  }
};
void check(int64_t B, int64_t T, int64_t H, int64_t Dh, bool gate, bool bf, uint64_t seed,
           double blo = 0.05, double bhi = 1.95) {
  using namespace sb;
  test::PathInputs in = test::make_inputs(B, T, H, Dh, gate, seed, blo, bhi);
  Vec dout = test::randn(in.nx(), seed + 99);
  const size_t nx = in.nx(), ns = in.ns();
  Buf q = up(in.q, bf), k = up(in.k, bf), v = up(in.v, bf), dO = up(dout, bf);
  Buf w = up(in.w, false), beta = up(in.beta, false), lf = up(in.log_f, false);
  Buf out = out_buf(nx, bf), lse = out_buf(ns, false), dq = out_buf(nx, bf), dk = out_buf(nx, bf), dv = out_buf(nx, bf);
  Buf dw = out_buf(nx, false), db = out_buf(ns, false), df = out_buf(ns, false);
  const cuda::AttnDims d{B, T, H, Dh};
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  const float* lfp = gate ? lf.f.data() : nullptr;
  std::vector<float> kept(static_cast<size_t>(B * H * 32 * 32), NAN);  // the forward's Tinv^T and Z
  cuda::detail::emu_fwd(out.p(bf), lse.f.data(), q.p(bf), k.p(bf), v.p(bf), w.f.data(), beta.f.data(), lfp, d, scale,
                        bf, kept.data());
  cuda::detail::emu_bwd(dq.p(bf), dk.p(bf), dv.p(bf), dw.f.data(), db.f.data(), df.f.data(), dO.p(bf), q.p(bf), k.p(bf),
                        v.p(bf), w.f.data(), beta.f.data(), lfp, lse.f.data(), d, scale, bf, nullptr);
  // The backward from the kept slots gives the same bits as the one that solves again.
  Buf dq2 = out_buf(nx, bf), dk2 = out_buf(nx, bf), dv2 = out_buf(nx, bf), dw2 = out_buf(nx, false);
  Buf db2 = out_buf(ns, false), df2 = out_buf(ns, false);
  cuda::detail::emu_bwd(dq2.p(bf), dk2.p(bf), dv2.p(bf), dw2.f.data(), db2.f.data(), df2.f.data(), dO.p(bf), q.p(bf),
                        k.p(bf), v.p(bf), w.f.data(), beta.f.data(), lfp, lse.f.data(), d, scale, bf, kept.data());
  const bool same = dq2.f == dq.f && dq2.h == dq.h && dk2.f == dk.f && dk2.h == dk.h && dv2.f == dv.f &&
                    dv2.h == dv.h && dw2.f == dw.f && db2.f == db.f && (!gate || df2.f == df.f);
  Vec r_out(nx), r_lse(ns), r_dq(nx, 0.0), r_dk(nx, 0.0), r_dv(nx, 0.0), r_dw(nx, 0.0), r_db(ns, 0.0), r_df(ns, 0.0);
  const double* rlf = gate ? in.log_f.data() : nullptr;
  const int64_t blk = nn::path_default_block(Dh);
  nn::path_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(),
                                     in.beta.data(), rlf, B, T, H, Dh, scale, nn::PathForm::Blockwise, blk, nullptr);
  nn::path_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), r_dw.data(), r_db.data(), r_df.data(),
                                      dout.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(), in.beta.data(),
                                      rlf, r_out.data(), r_lse.data(), B, T, H, Dh, scale, nn::PathForm::Blockwise, blk,
                                      nullptr);
  const double tout = bf ? 1e-2 : 1e-4, tlse = bf ? 1e-3 : 1e-4, tg = bf ? 2e-2 : 1e-3;
  int64_t bad = 0;
  struct It { const char* n; Vec g; const Vec* r; double tol; };
  std::vector<It> items = {{"out", down(out, nx, bf, bad), &r_out, tout}, {"lse", down(lse, ns, false, bad), &r_lse, tlse},
                           {"dq", down(dq, nx, bf, bad), &r_dq, tg}, {"dk", down(dk, nx, bf, bad), &r_dk, tg},
                           {"dv", down(dv, nx, bf, bad), &r_dv, tg}, {"dw", down(dw, nx, false, bad), &r_dw, tg},
                           {"dbeta", down(db, ns, false, bad), &r_db, tg}};
  if (gate) items.push_back({"dlog_f", down(df, ns, false, bad), &r_df, tg});
  bool ok = bad == 0 && same;
  std::string line;
  char buf[96];
  std::snprintf(buf, sizeof buf, "(%ld,%ld,%ld,%ld) %s%s beta[%.2f,%.3f]:", (long)B, (long)T, (long)H, (long)Dh,
                bf ? "bf16" : "fp32", gate ? " gate" : "", blo, bhi);
  line = buf;
  for (auto& it : items) {
    const double e = rel_err(it.g, *it.r);
    ok = ok && e <= it.tol;
    std::snprintf(buf, sizeof buf, " %s %.2e%s", it.n, e, e <= it.tol ? "" : "(!)");
    line += buf;
  }
  if (gate) {
    auto got = down(df, ns, false, bad);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) ok = ok && got[b * T * H + h] == 0.0;
  }
  if (bad) line += " NONFINITE=" + std::to_string(bad);
  if (!same) line += " KEPT-DIFFERS";
  std::snprintf(buf, sizeof buf, " bits %016llx",
                (unsigned long long)(Digest{} << out << lse << dq << dk << dv << dw << db << (gate ? df : Buf{})).h);
  line += buf;
  std::printf("%s%s\n", ok ? "ok   " : "FAIL ", line.c_str());
  failures += !ok;
}
// Softmax (NoPE / FoX gate; with rope, RoPE inside the kernels: the reference gets q and k rotated and
// its dq, dk rotated back) against nn::softmax_attention_* in double; position 0's dlog_f is 0.
void check_softmax(int64_t B, int64_t T, int64_t H, int64_t Dh, bool gate, bool bf, uint64_t seed, bool rope = false) {
  using namespace sb;
  test::PathInputs in = test::make_inputs(B, T, H, Dh, gate, seed, 0.05, 1.95);
  Vec dout = test::randn(in.nx(), seed + 99);
  const size_t nx = in.nx(), ns = in.ns();
  Buf q = up(in.q, bf), k = up(in.k, bf), v = up(in.v, bf), dO = up(dout, bf), lf = up(in.log_f, false);
  std::vector<float> cs(static_cast<size_t>(T * Dh));  // rope.cu's table: [T, Dh / 2] (cos, sin), angles in double
  for (int64_t t = 0; t < T; ++t)
    for (int64_t m = 0; m < Dh / 2; ++m) {
      const double a = static_cast<double>(t) * std::pow(10000.0, -2.0 * static_cast<double>(m) / Dh);
      const size_t i = static_cast<size_t>(2 * (t * Dh / 2 + m));
      cs[i] = static_cast<float>(std::cos(a)), cs[i + 1] = static_cast<float>(std::sin(a));
    }
  if (rope) {
    nn::rope_forward<double>(in.q.data(), in.q.data(), B, T, H, Dh);
    nn::rope_forward<double>(in.k.data(), in.k.data(), B, T, H, Dh);
    if (bf)  // the bf16 kernels round the rotated q, k to bf16 once
      for (Vec* x : {&in.q, &in.k})
        for (double& e : *x) e = bf16_value(bf16_bits(static_cast<float>(e)));
  }
  const float* csp = rope ? cs.data() : nullptr;
  Buf out = out_buf(nx, bf), lse = out_buf(ns, false), dq = out_buf(nx, bf), dk = out_buf(nx, bf), dv = out_buf(nx, bf);
  Buf df = out_buf(ns, false);
  const cuda::AttnDims d{B, T, H, Dh};
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  const float* lfp = gate ? lf.f.data() : nullptr;
  cuda::detail::emu_softmax_fwd(out.p(bf), lse.f.data(), q.p(bf), k.p(bf), v.p(bf), lfp, csp, d, scale, bf);
  cuda::detail::emu_softmax_bwd(dq.p(bf), dk.p(bf), dv.p(bf), df.f.data(), dO.p(bf), q.p(bf), k.p(bf), v.p(bf), lfp,
                                csp, lse.f.data(), d, scale, bf);
  Vec r_out(nx), r_lse(ns), r_dq(nx, 0.0), r_dk(nx, 0.0), r_dv(nx, 0.0), r_df(ns, 0.0);
  const double* rlf = gate ? in.log_f.data() : nullptr;
  nn::softmax_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), rlf, B, T,
                                        H, Dh, scale);
  nn::softmax_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), gate ? r_df.data() : nullptr,
                                         dout.data(), in.q.data(), in.k.data(), in.v.data(), rlf, r_out.data(),
                                         r_lse.data(), B, T, H, Dh, scale);
  if (rope)
    for (Vec* g : {&r_dq, &r_dk}) {
      Vec un(nx, 0.0);
      nn::rope_backward<double>(un.data(), g->data(), B, T, H, Dh);
      *g = std::move(un);
    }
  const double tout = bf ? 1e-2 : 1e-4, tlse = bf ? 1e-3 : 1e-4, tg = bf ? 2e-2 : 1e-3;
  int64_t bad = 0;
  struct It { const char* n; Vec g; const Vec* r; double tol; };
  std::vector<It> items = {{"out", down(out, nx, bf, bad), &r_out, tout}, {"lse", down(lse, ns, false, bad), &r_lse, tlse},
                           {"dq", down(dq, nx, bf, bad), &r_dq, tg}, {"dk", down(dk, nx, bf, bad), &r_dk, tg},
                           {"dv", down(dv, nx, bf, bad), &r_dv, tg}};
  if (gate) items.push_back({"dlog_f", down(df, ns, false, bad), &r_df, tg});
  bool ok = bad == 0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "softmax (%ld,%ld,%ld,%ld) %s%s%s:", (long)B, (long)T, (long)H, (long)Dh,
                bf ? "bf16" : "fp32", gate ? " gate" : "", rope ? " rope" : "");
  std::string line = buf;
  for (auto& it : items) {
    const double e = rel_err(it.g, *it.r);
    ok = ok && e <= it.tol;
    std::snprintf(buf, sizeof buf, " %s %.2e%s", it.n, e, e <= it.tol ? "" : "(!)");
    line += buf;
  }
  if (bad) line += " NONFINITE=" + std::to_string(bad);
  std::snprintf(buf, sizeof buf, " bits %016llx",
                (unsigned long long)(Digest{} << out << lse << dq << dk << dv << (gate ? df : Buf{})).h);
  line += buf;
  std::printf("%s%s\n", ok ? "ok   " : "FAIL ", line.c_str());
  failures += !ok;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "grid";
  uint64_t seed = 100;
  if (mode == "grid") {
    for (bool bf : {false, true})
      for (int64_t Dh : {16, 32})
        for (int64_t T : {1, 2, 7, 16, 31, 32})
          for (bool gate : {false, true}) check(3, T, 3, Dh, gate, bf, seed += 7);
    for (bool bf : {false, true}) {
      check(2, 32, 2, 16, true, bf, seed += 7, 1.9, 1.999);
      check(2, 32, 2, 32, false, bf, seed += 7, 1.9, 1.999);
      check(1, 32, 3, 32, true, bf, seed += 7, 1.9, 1.999);
      check(2, 31, 1, 16, false, bf, seed += 7, 0.0, 2.0);
      check(4, 32, 4, 32, true, bf, seed += 7);
      check(4, 22, 8, 32, false, bf, seed += 7);
      check(4, 21, 8, 16, true, bf, seed += 7);
    }
    for (bool bf : {false, true})
      for (int64_t Dh : {16, 32, 64})
        for (int64_t T : {1, 2, 7, 21, 31, 32})
          for (bool gate : {false, true}) check_softmax(3, T, 3, Dh, gate, bf, seed += 7);
    for (bool bf : {false, true})
      for (int64_t Dh : {16, 32, 64})
        for (int64_t T : {1, 7, 21, 32}) check_softmax(3, T, 3, Dh, T == 7, bf, seed += 7, true);
    for (bool bf : {false, true}) {  // PaTH at Dh 64: the grid's lengths, Merrill's A5 shape, beta near 2
      for (int64_t T : {1, 2, 7, 16, 31, 32})
        for (bool gate : {false, true}) check(3, T, 3, 64, gate, bf, seed += 7);
      check(4, 21, 8, 64, false, bf, seed += 7);
      check(1, 32, 3, 64, true, bf, seed += 7, 1.9, 1.999);
    }
  } else {  // a few small cases (for the thread sanitizer)
    check(1, 7, 3, 16, true, false, seed += 7);
    check(1, 32, 1, 32, true, true, seed += 7);
    check(1, 13, 1, 32, false, false, seed += 7);
    check_softmax(1, 21, 1, 64, true, true, seed += 7);
    check_softmax(1, 32, 2, 16, false, false, seed += 7);
    check_softmax(1, 21, 2, 32, false, true, seed += 7, true);
  }
  std::printf("%d failures\n", failures);
  return failures != 0;
}
