// cuda_check.cpp: the out-of-line throwing helpers behind CUDA_CHECK (sb::Error
// with the error string, the failing expression and file:line).
#include "kernels/common/cuda_check.hpp"

#include "core/error.hpp"

namespace sb::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  fail("CUDA error '{}' ({}) in '{}' at {}:{}", cudaGetErrorString(err), cudaGetErrorName(err), expr, file, line);
}

void throw_error(const char* what) { throw Error(what); }

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the "no driver / no device" error
    return false;
  }
  return count > 0;
}

}  // namespace sb::cuda
