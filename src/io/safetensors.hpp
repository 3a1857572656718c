// safetensors.hpp: writes the safetensors format (what PyTorch, JAX and Hugging Face tools load):
// an 8-byte little-endian header length N, N bytes of JSON ({"NAME": {"dtype", "shape",
// "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}, padded with spaces to a
// multiple of 8), then every tensor's raw little-endian bytes, back to back in the header's order.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct SafeTensor {
  std::string name;
  std::string dtype;           // "F32", "F64", "I32", ...
  std::vector<int64_t> shape;  // row-major
  std::string bytes;           // numel x element size, little-endian
};

// A tensor from host values of a supported type (float F32, double F64, int32_t I32).
template <class T>
SafeTensor safe_tensor(std::string name, std::vector<int64_t> shape, const T* data);

// The whole file's bytes. sb::Error for a duplicate or empty name, a reserved name
// ("__metadata__"), or a byte count that does not match dtype and shape.
std::string safetensors_bytes(const std::vector<SafeTensor>& tensors, const std::map<std::string, std::string>& metadata);

// Writes them to `path` atomically.
void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace sb
