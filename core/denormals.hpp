// denormals.hpp: flush-to-zero / denormals-are-zero for the calling thread's float arithmetic.
// Softmax probabilities of far-away keys (FoX gates, PaTH) reach the subnormal range, where x86
// arithmetic is ~100x slower; training threads turn subnormals into zeros (as PyTorch's
// set_flush_denormal does). Values that small do not change any result above 1e-38.
#pragma once
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace sb {

inline void flush_denormals_in_this_thread() {
#if defined(__SSE__) || defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
#endif
}

}  // namespace sb
