// instantiate.hpp: the scalar type an src/nn source instantiates its ops for. Every source is
// compiled twice (src/CMakeLists.txt): for float in sb_nn at the build type's flags, and with
// SB_NN_DOUBLE for double in sb_nn_double at -O1 (double is only the finite-difference reference
// and export's float64 check; path_backward.cpp's double pass is the tests' sb_grad_f64).
// Scalar-independent functions (workspace sizes) are defined in the float pass only:
// #if SB_NN_FLOAT_PASS.
#pragma once

#ifdef SB_NN_DOUBLE
#define SB_NN_SCALAR double
#define SB_NN_FLOAT_PASS 0
#else
#define SB_NN_SCALAR float
#define SB_NN_FLOAT_PASS 1
#endif
