// bench_attention.cpp: `statebench bench attention [--dtype bf16|fp32] [--shapes BxTxHxDh ...]
// [--kind path|softmax|both|sba] [--reps N] [--sdpa FILE] [--json FILE] [--profile]`: device time
// (median of CUDA event timings) of the CUDA PaTH, softmax and stick-breaking attention kernels, forward and
// forward+backward, on random inputs; nominal TFLOP/s; workspace and peak memory; optionally the
// ratio to the PyTorch SDPA numbers written by tools/sdpa_bench.py --json; with --profile, one more
// untimed forward+backward per shape prints each launch's device time. Without CUDA it fails.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/build_info.hpp"
#include "cli/cli.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"

#ifdef STATEBENCH_HAVE_CUDA
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>

#include "kernels/attention/attention.hpp"
#include "kernels/common/device_buffer.hpp"
#endif

namespace sb::cli {

namespace {

struct Shape {
  int64_t B = 0, T = 0, H = 0, Dh = 0;
};

// The benchmark shapes: language-model scale and synthetic-task scale.
const std::vector<std::string> kDefaultShapes = {"8x2048x16x64", "4x4096x16x64",  "2x8192x16x128",
                                                 "128x256x8x64", "256x128x8x32", "64x512x4x64"};

[[maybe_unused]] Shape parse_shape(const std::string& s) {  // used only with CUDA
  Shape sh;
  char tail = 0;
  long long b, t, h, d;
  if (std::sscanf(s.c_str(), "%lldx%lldx%lldx%lld%c", &b, &t, &h, &d, &tail) != 4 || b < 1 || t < 1 || h < 1)
    fail("bench attention: bad shape '{}' (expected BxTxHxDh, e.g. 8x2048x16x64)", s);
  sh.B = b, sh.T = t, sh.H = h, sh.Dh = d;
  return sh;
}

struct BenchAttentionOptions {
  std::string dtype = "bf16", kind = "both", json, sdpa;
  std::vector<std::string> shapes = kDefaultShapes;
  int reps = 20;
  bool profile = false;
};

#ifdef STATEBENCH_HAVE_CUDA

using cuda::DeviceBytes;

struct Result {
  std::string kernel;
  Shape s;
  double fwd_ms = 0, fb_ms = 0, flops_fwd = 0;
  size_t ws_fwd = 0, ws_bwd = 0, tensors = 0;
  double sdpa_fwd = 0, sdpa_fb = 0, sdpa_peak = 0;
};

// Deterministic pseudo-random fill (splitmix64), uniform in [lo, hi).
struct Fill {
  uint64_t state;
  double next(double lo, double hi) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

DeviceBytes random_tensor(int64_t n, cuda::DType dt, Fill& f, double lo, double hi) {
  if (dt == cuda::DType::BF16) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (auto& x : h) {
      const float v = static_cast<float>(f.next(lo, hi));
      uint32_t u;
      std::memcpy(&u, &v, 4);
      x = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
    return cuda::to_device(h);
  }
  std::vector<float> h(static_cast<size_t>(n));
  for (auto& x : h) x = static_cast<float>(f.next(lo, hi));
  return cuda::to_device(h);
}

DeviceBytes unit_rows(int64_t rows, int64_t Dh, Fill& f) {
  std::vector<float> h(static_cast<size_t>(rows * Dh));
  for (int64_t r = 0; r < rows; ++r) {
    double n = 0;
    for (int64_t d = 0; d < Dh; ++d) n += std::pow(h[r * Dh + d] = static_cast<float>(f.next(-1, 1)), 2);
    for (int64_t d = 0; d < Dh; ++d) h[r * Dh + d] = static_cast<float>(h[r * Dh + d] / std::sqrt(n));
  }
  return cuda::to_device(h);
}

// Median device time (ms) of f() over reps runs, after warm-up.
template <class F>
double median_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(a));
    f();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// kernel: "path", "softmax" or "sba" (stick-breaking, with the remainder).
Result measure(const Shape& s, cuda::DType dt, const std::string& kernel, int reps, bool profile) {
  const bool path = kernel == "path", sba = kernel == "sba";
  const cuda::AttnDims d{s.B, s.T, s.H, s.Dh};
  const int64_t nx = s.B * s.T * s.H * s.Dh, ns = s.B * s.T * s.H;
  const size_t esz = cuda::dtype_bytes(dt);
  Fill f{static_cast<uint64_t>(nx * 31 + s.Dh)};
  DeviceBytes q = random_tensor(nx, dt, f, -1.7, 1.7), k = random_tensor(nx, dt, f, -1.7, 1.7);
  DeviceBytes v = random_tensor(nx, dt, f, -1.7, 1.7), dout = random_tensor(nx, dt, f, -1.7, 1.7);
  DeviceBytes w, beta, dw, dbeta;
  if (path) {
    w = unit_rows(ns, s.Dh, f);
    beta = random_tensor(ns, cuda::DType::F32, f, 0.05, 1.95);
    dw.resize(nx * 4);
    dbeta.resize(ns * 4);
  }
  DeviceBytes out(nx * esz), lse(ns * 4), dq(nx * esz), dk(nx * esz), dv(nx * esz);
  Result r;
  r.kernel = kernel;
  r.s = s;
  // PaTH: the forward keeps its factors for the backward (as training does), counted with the tensors.
  r.ws_fwd = path ? cuda::path_attention_forward_workspace_bytes(d, dt, true)
           : sba  ? 0
                  : cuda::softmax_attention_forward_workspace_bytes(d, dt);
  r.ws_bwd = path ? cuda::path_attention_backward_workspace_bytes(d, dt, true)
           : sba  ? cuda::sba_attention_backward_workspace_bytes(d)
                  : cuda::softmax_attention_backward_workspace_bytes(d, dt);
  DeviceBytes ws(std::max(r.ws_fwd, r.ws_bwd)), factors(path ? cuda::path_attention_factors_bytes(d, dt) : 0);
  r.tensors = 8 * nx * esz + 2 * ns * 4 + (path ? 2 * nx * 4 + 2 * ns * 4 + factors.bytes() : 0);
  const float scale = 1.f / std::sqrt(static_cast<float>(s.Dh));
  cuda::AttentionOptions opt;
  auto fwd = [&] {
    if (path)
      cuda::path_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                        beta.as<float>(), nullptr, d, scale, dt, ws.data(), ws.bytes(), nullptr,
                                        factors.data(), opt);
    else if (sba)
      cuda::sba_attention_forward_cuda(out.data(), q.data(), k.data(), v.data(), d, scale, dt, true, nullptr);
    else
      cuda::softmax_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), nullptr, d, scale,
                                           dt, ws.data(), ws.bytes(), nullptr, opt);
  };
  auto bwd = [&] {
    if (path)
      cuda::path_attention_backward_cuda(dq.data(), dk.data(), dv.data(), dw.as<float>(), dbeta.as<float>(), nullptr,
                                         dout.data(), q.data(), k.data(), v.data(), w.as<float>(), beta.as<float>(),
                                         nullptr, out.data(), lse.as<float>(), d, scale, dt, ws.data(), ws.bytes(),
                                         nullptr, factors.data(), opt);
    else if (sba)
      cuda::sba_attention_backward_cuda(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), d,
                                        scale, dt, true, ws.data(), ws.bytes(), nullptr);
    else
      cuda::softmax_attention_backward_cuda(dq.data(), dk.data(), dv.data(), nullptr, dout.data(), q.data(), k.data(),
                                            v.data(), nullptr, out.data(), lse.as<float>(), d, scale, dt, ws.data(),
                                            ws.bytes(), nullptr, opt);
  };
  r.fwd_ms = median_ms(fwd, reps);
  r.fb_ms = median_ms([&] { fwd(), bwd(); }, reps);
  if (profile) {  // after the timed runs: the profile synchronises after every launch
    opt.profile = true;
    fwd(), bwd();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Nominal causal-attention matmul FLOPs (Q K^T and P V over the causal half, as FlashAttention
  // counts them); forward+backward = 3.5x. PaTH's extra transport work is not counted.
  r.flops_fwd = 4.0 * static_cast<double>(s.B * s.H * s.Dh) * static_cast<double>(s.T) * static_cast<double>(s.T + 1) / 2;
  return r;
}

void read_sdpa(std::vector<Result>& results, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    fail("bench attention: cannot read SDPA results '{}': {}", path, e.what());
  }
  for (const auto& e : root["results"]) {
    const Shape s{e["B"].as<int64_t>(), e["T"].as<int64_t>(), e["H"].as<int64_t>(), e["Dh"].as<int64_t>()};
    for (Result& r : results)
      if (r.s.B == s.B && r.s.T == s.T && r.s.H == s.H && r.s.Dh == s.Dh) {
        r.sdpa_fwd = e["fwd_ms"].as<double>();
        r.sdpa_fb = e["fwdbwd_ms"].as<double>();
        r.sdpa_peak = e["peak_bytes"].as<double>();
      }
  }
}

std::string results_json(const std::vector<Result>& results, const std::string& dtype, const std::string& device) {
  std::string out = fmt::format(
      "{{\n  \"benchmark\": \"attention\",\n  \"statebench\": \"{}\",\n  \"commit\": \"{}\",\n  \"device\": \"{}\",\n"
      "  \"dtype\": \"{}\",\n  \"results\": [",
      STATEBENCH_VERSION, sb::build_commit(), device, dtype);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out += fmt::format(
        "{}\n    {{\"kernel\": \"{}\", \"B\": {}, \"T\": {}, \"H\": {}, \"Dh\": {}, \"fwd_ms\": {:.5f}, "
        "\"fwdbwd_ms\": {:.5f}, \"fwd_tflops\": {:.3f}, \"fwdbwd_tflops\": {:.3f}, \"fwd_workspace_bytes\": {}, "
        "\"bwd_workspace_bytes\": {}, \"tensor_bytes\": {}, \"peak_bytes\": {}}}",
        i ? "," : "", r.kernel, r.s.B, r.s.T, r.s.H, r.s.Dh, r.fwd_ms, r.fb_ms, r.flops_fwd / r.fwd_ms * 1e-9,
        3.5 * r.flops_fwd / r.fb_ms * 1e-9, r.ws_fwd, r.ws_bwd, r.tensors, r.tensors + std::max(r.ws_fwd, r.ws_bwd));
  }
  return out + "\n  ]\n}\n";
}

void run_bench_attention(const BenchAttentionOptions& opt) {
  if (!cuda::cuda_device_available()) fail("bench attention: no CUDA device available");
  if (opt.dtype != "bf16" && opt.dtype != "fp32") fail("bench attention: --dtype '{}' (expected bf16 or fp32)", opt.dtype);
  if (opt.kind != "path" && opt.kind != "softmax" && opt.kind != "both" && opt.kind != "sba")
    fail("bench attention: --kind '{}' (expected path, softmax, both or sba)", opt.kind);
  if (opt.reps < 1) fail("bench attention: --reps {} must be >= 1", opt.reps);
  std::unique_ptr<AtomicFile> json_file;
  if (!opt.json.empty()) json_file = std::make_unique<AtomicFile>(opt.json);
  const cuda::DType dt = opt.dtype == "bf16" ? cuda::DType::BF16 : cuda::DType::F32;
  std::vector<Shape> shapes;
  for (const auto& s : opt.shapes) shapes.push_back(parse_shape(s));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fmt::print("bench attention: {} on {}, median of {} runs (statebench {} {})\n", opt.dtype, prop.name, opt.reps,
             STATEBENCH_VERSION, sb::build_commit());
  std::vector<Result> results;
  for (const Shape& s : shapes)
    for (const char* kernel : {"path", "softmax", "sba"}) {
      const bool wanted = opt.kind == kernel || (opt.kind == "both" && std::strcmp(kernel, "sba") != 0);
      if (!wanted) continue;
      results.push_back(measure(s, dt, kernel, opt.reps, opt.profile));
      const Result& r = results.back();
      fmt::print("  {} {}x{}x{}x{}: fwd {:.3f} ms, fwd+bwd {:.3f} ms\n", r.kernel, s.B, s.T, s.H, s.Dh, r.fwd_ms,
                 r.fb_ms);
      std::fflush(stdout);
    }
  if (!opt.sdpa.empty()) read_sdpa(results, opt.sdpa);
  const double MiB = 1024.0 * 1024.0;
  std::vector<std::vector<std::string>> rows{{"kernel", "B,T,H,Dh", "fwd ms", "fwd TF/s", "f+b ms", "f+b TF/s",
                                              "ws MiB", "peak MiB", "fwd/SDPA", "f+b/SDPA", "peak/SDPA"}};
  for (const Result& r : results) {
    const double peak = static_cast<double>(r.tensors + std::max(r.ws_fwd, r.ws_bwd));
    auto ratio = [](double a, double b) { return b > 0 ? fmt::format("{:.2f}", a / b) : std::string("-"); };
    rows.push_back({r.kernel, fmt::format("{},{},{},{}", r.s.B, r.s.T, r.s.H, r.s.Dh), fmt::format("{:.3f}", r.fwd_ms),
                    fmt::format("{:.1f}", r.flops_fwd / r.fwd_ms * 1e-9), fmt::format("{:.3f}", r.fb_ms),
                    fmt::format("{:.1f}", 3.5 * r.flops_fwd / r.fb_ms * 1e-9),
                    fmt::format("{:.0f}", static_cast<double>(std::max(r.ws_fwd, r.ws_bwd)) / MiB),
                    fmt::format("{:.0f}", peak / MiB), ratio(r.fwd_ms, r.sdpa_fwd), ratio(r.fb_ms, r.sdpa_fb),
                    ratio(peak, r.sdpa_peak)});
  }
  std::fputs(format_table(rows).c_str(), stdout);
  fmt::print("TF/s: nominal causal attention FLOPs (4 B H Dh T(T+1)/2 forward, 3.5x that forward+backward)\n");
  if (opt.kind == "sba")
    fmt::print("sba: random q, k give scores around 0, so each query's stick is spent after about 60 keys and the "
               "kernels stop walking back there\n");
  if (json_file) {
    json_file->write(results_json(results, opt.dtype, prop.name));
    json_file->commit();
    fmt::print("wrote {}\n", opt.json);
  }
}

#else

void run_bench_attention(const BenchAttentionOptions&) {
  fail("bench attention: statebench was built without CUDA (configure with -DSTATEBENCH_CUDA=ON on a machine with nvcc)");
}

#endif

}  // namespace

void add_bench_attention(CLI::App& bench, Context& /*ctx*/) {
  auto opt = std::make_shared<BenchAttentionOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "attention", "CUDA PaTH, softmax and stick-breaking attention kernels: time, TFLOP/s, memory");
  cmd->add_option("--dtype", opt->dtype, "bf16 or fp32")->capture_default_str();
  cmd->add_option("--shapes", opt->shapes, "shapes BxTxHxDh (default: the six issue shapes)");
  cmd->add_option("--kind", opt->kind, "path, softmax, both (path and softmax) or sba")->capture_default_str();
  cmd->add_option("--reps", opt->reps, "timed runs per measurement (median reported)")->capture_default_str();
  cmd->add_option("--sdpa", opt->sdpa, "JSON from tools/sdpa_bench.py --json, for ratios")->type_name("FILE");
  cmd->add_option("--json", opt->json, "also write the results to this JSON file")->type_name("FILE");
  cmd->add_flag("--profile", opt->profile,
                "after timing each shape, one more forward+backward printing each launch's device time (stderr)");
  cmd->callback([opt] { run_bench_attention(*opt); });
}

}  // namespace sb::cli
