// flops.hpp: model FLOPs per trained token, counted from the configuration (what MFU divides by),
// and the table of devices' dense peak throughput per precision (vendor datasheets, no sparsity).
// Conventions (docs/benchmarks.md): products only (no norms, activations, RoPE, convolution or
// optimiser), training = 3 x forward (backward = 2 x forward), causal attention over T / 2 keys.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/config.hpp"

namespace sb {

struct FlopCount {
  double matmul = 0;     // weight products of every layer (q, k, v, o, MLP, PaTH's w1 / w2 / wbeta, FoX's wf)
  double attention = 0;  // the score and value products Q K^T and P V (causal: T / 2 keys on average)
  double head = 0;       // the LM head, counted on labelled tokens only (its share: labelled_fraction)
  double total() const { return matmul + attention + head; }
};

// Training FLOPs (forward + backward) per token of sequences of T tokens over a vocabulary of V,
// when a fraction `labelled_fraction` in [0, 1] of the tokens carries a loss (only their logits are
// computed). Each product of a [n, i] input by an [i, o] weight costs 2 i o per row forward and
// twice that backward (input and weight gradients): 6 i o per token. Attention per layer and token:
// forward 2 (Q K^T) x 2 FLOPs x H Dh x T / 2 keys, x 3 for training: 6 H Dh T (flash-attention's
// causal convention, without its backward recomputation). PaTH layers count the same attention
// products as softmax ones (the Householder transports are algorithmic extra work, not counted).
FlopCount train_flops_per_token(const ModelConfig& model, int64_t T, int64_t V, double labelled_fraction = 1.0);

// Dense peak throughput of a device in TFLOP/s for each training precision.
struct DevicePeak {
  const char* match;  // substring of the device's name, e.g. "H100 PCIe"
  double bf16, tf32, fp32;
};

// The table (first match wins, so specific names precede general ones: "H100 PCIe" before "H100").
const DevicePeak* device_peaks(int64_t* count);

// The peak in FLOP/s of the device named `device_name` (cudaDeviceProp::name, as in
// "NVIDIA H100 80GB HBM3 (tf32)") at `precision` ("bf16", "tf32" or "fp32"); nullopt for an unknown
// device (a CPU, a GPU missing from the table) or precision.
std::optional<double> peak_flops(const std::string& device_name, const std::string& precision);

}  // namespace sb
