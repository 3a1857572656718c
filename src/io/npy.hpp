// npy.hpp: reading and writing NumPy .npy arrays (float64, float32, int32, int64; C order), for
// golden fixtures shared with the PyTorch reference script and for test data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> data;  // every dtype widened to double (ints exactly up to 2^53)
  int64_t numel() const;
};

// Throws sb::Error naming the file for a missing file, a bad header, Fortran order, an
// unsupported dtype or a short payload.
NpyArray read_npy(const std::string& path);

// Writes atomically; dtype "<f8" (float64) or "<i4" (int32, values must fit).
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<double>& data,
               const std::string& dtype = "<f8");

}  // namespace sb
