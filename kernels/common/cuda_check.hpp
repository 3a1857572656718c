// cuda_check.hpp: error checking for CUDA runtime calls. Every failure throws sb::Error with the
// failing expression, file:line and the runtime's error string; kernel launches are checked with
// SB_CUDA_CHECK_LAUNCH() (cudaGetLastError right after the <<<>>>). The throwing functions live in
// kernels/common/cuda_check.cpp so that nvcc-compiled files need not parse fmt.
#pragma once
#include <cuda_runtime.h>

namespace sb::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
// Throws sb::Error(what).
[[noreturn]] void throw_error(const char* what);
// True when the CUDA runtime reports at least one usable device (clears the runtime's error if not).
bool cuda_device_available();

}  // namespace sb::cuda

#define CUDA_CHECK(expr)                                                                 \
  do {                                                                                   \
    const cudaError_t sb_cuda_err_ = (expr);                                             \
    if (sb_cuda_err_ != cudaSuccess)                                                     \
      ::sb::cuda::throw_cuda_error(sb_cuda_err_, #expr, __FILE__, __LINE__);             \
  } while (0)

// After a kernel launch: reports launch-configuration errors (and earlier asynchronous ones).
#define SB_CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
