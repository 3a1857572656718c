// path_attention.cpp: public entry points of PaTH attention: shape checks, workspace sizes and
// allocation, the forward's dispatch to the Direct (path_direct.cpp) or Blockwise
// (path_blockwise.cpp) form. The backward's entry point is in path_backward.cpp.
#include "core/aligned_vector.hpp"
#include "nn/path_attention.hpp"

#include "nn/instantiate.hpp"
#include "nn/path_internal.hpp"

namespace sb::nn {

using namespace path_detail;

#if SB_NN_FLOAT_PASS  // scalar-independent: defined once (nn/instantiate.hpp)
int64_t path_default_block(int64_t Dh) { return Dh <= 64 ? 32 : 64; }

int64_t path_forward_workspace_elems(int64_t T, int64_t Dh, PathForm form, int64_t block) {
  check_shapes(1, T, 1, Dh, form, block);
  return form == PathForm::Direct ? direct_forward_ws(T, Dh) : blockwise_forward_ws(T, Dh, block);
}

int64_t path_backward_workspace_elems(int64_t T, int64_t Dh, PathForm form, int64_t block) {
  check_shapes(1, T, 1, Dh, form, block);
  return form == PathForm::Direct ? direct_backward_ws(T, Dh) : blockwise_backward_ws(T, Dh, block);
}
#endif

template <class S>
void path_attention_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* w,
                            const S* beta, const S* log_f, int64_t B, int64_t T, int64_t H,
                            int64_t Dh, S scale, PathForm form, int64_t block, S* workspace) {
  check_shapes(B, T, H, Dh, form, block);
  AlignedVector<S> owned;
  workspace = workspace_or_owned(workspace, owned, path_forward_workspace_elems(T, Dh, form, block));
  if (form == PathForm::Direct)
    direct_forward(out, lse, q, k, v, w, beta, log_f, B, T, H, Dh, scale, workspace);
  else
    blockwise_forward(out, lse, q, k, v, w, beta, log_f, B, T, H, Dh, scale, block, workspace);
}

#define SB_PATH_INSTANTIATE(S)                                                                    \
  template void path_attention_forward<S>(S*, S*, const S*, const S*, const S*, const S*,         \
                                          const S*, const S*, int64_t, int64_t, int64_t, int64_t, \
                                          S, PathForm, int64_t, S*);
SB_PATH_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_INSTANTIATE

}  // namespace sb::nn
