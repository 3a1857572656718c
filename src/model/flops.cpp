// flops.cpp: train_flops_per_token (model FLOPs of one trained token) and the device peak table
// that MFU divides by. Sources of the peaks: NVIDIA's datasheets (dense, i.e. without the 2:4
// sparsity factor the datasheets print first); docs/benchmarks.md lists them.
#include "model/flops.hpp"

#include <iterator>

namespace sb {

FlopCount train_flops_per_token(const ModelConfig& m, int64_t T, int64_t V, double labelled_fraction) {
  const double D = static_cast<double>(m.d_model), H = static_cast<double>(m.n_heads);
  const double Dh = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.d_model / m.n_heads);
  const double HD = H * Dh, F = static_cast<double>(m.mlp_hidden()), R = static_cast<double>(m.path.rank);
  FlopCount c;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const Attention a = m.layer_attention(l);
    double weights = 3 * D * HD + HD * D;  // wq, wk, wv, wo
    if (uses_path(a)) weights += D * R + R * HD + D * H;  // w1, w2, wbeta
    if (uses_gate(a)) weights += D * H;                    // wf
    if (m.mlp == MlpKind::swiglu) weights += D * 2 * F + F * D;  // w_gate_up, w_down
    if (m.mlp == MlpKind::gelu) weights += D * F + F * D;        // w_in, w_out
    c.matmul += 6 * weights;
    c.attention += 6 * HD * static_cast<double>(T);  // 3 x (2 products x 2 FLOPs x HD x T / 2)
  }
  c.head = 6 * D * static_cast<double>(V) * labelled_fraction;
  return c;
}

namespace {
// TFLOP/s, dense: bf16 / fp16 tensor cores (fp32 accumulation), tf32 tensor cores, fp32 (CUDA cores).
const DevicePeak kPeaks[] = {
    {"H100 PCIe", 756.0, 378.0, 51.2},
    {"H100 NVL", 835.5, 417.5, 60.0},
    {"GH200", 989.4, 494.7, 66.9},
    {"H200 NVL", 835.5, 417.5, 60.0},
    {"H200", 989.4, 494.7, 66.9},
    {"H100", 989.4, 494.7, 66.9},  // SXM5 (HBM3); "H100 80GB HBM3"
    {"H800", 989.4, 494.7, 66.9},
    {"A100", 312.0, 156.0, 19.5},
    {"A800", 312.0, 156.0, 19.5},
    {"L40S", 362.05, 183.0, 91.6},
    {"L40", 181.05, 90.5, 90.5},
};
}  // namespace

const DevicePeak* device_peaks(int64_t* count) {
  *count = static_cast<int64_t>(std::size(kPeaks));
  return kPeaks;
}

std::optional<double> peak_flops(const std::string& device_name, const std::string& precision) {
  for (const DevicePeak& p : kPeaks) {
    if (device_name.find(p.match) == std::string::npos) continue;
    const double tflops = precision == "bf16"   ? p.bf16
                          : precision == "tf32" ? p.tf32
                          : precision == "fp32" ? p.fp32
                                                : 0.0;
    if (tflops <= 0) return std::nullopt;
    return tflops * 1e12;
  }
  return std::nullopt;
}

}  // namespace sb
