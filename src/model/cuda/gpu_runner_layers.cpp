// gpu_runner_layers.cpp: GpuRunner's layer stacks (embedding and learned positions, pre- or
// post-norm blocks, attention, MLP; forward and backward, recorded into the CUDA graphs) and the
// rows tail of sparse-label batches: with M of
// the N rows labelled, the last layer after its q / k / v (and w, beta, gate) products runs on
// those rows only, padded to Mt (attention output rows, wo, MLP, final norm), which is exact since
// the loss reads nothing else; with PaTH there, its attention runs per labelled query
// (path_attention_rows_*).
// Op regions (ProfileScope) time each op when a profiler is attached; otherwise they do nothing.
#include <string>

#include "model/cuda/gpu_runner_impl.hpp"
#include "nn/path_wpath.hpp"

namespace sb::cuda {

void GpuRunner::Impl::norm_forward(const float* prm, Target y, Buf& mean, Buf& rstd, const float* x,
                                   const std::string& name, int64_t n) {
  ProfileScope op(prof, "fwd.norm");
  const float* g = P(prm, name + ".weight");
  const bool y16 = y.type == Storage::bf16;
  auto* y32 = static_cast<float*>(y.data);
  auto* yb = static_cast<uint16_t*>(y.data);
  if (c.norm == NormKind::rmsnorm && y16)
    rmsnorm_forward_bf16_cuda(yb, rstd.data(), x, g, n, D, 1e-6, stream);
  else if (c.norm == NormKind::rmsnorm)
    rmsnorm_forward_cuda(y32, rstd.data(), x, g, n, D, 1e-6, stream);
  else if (y16)
    layernorm_forward_bf16_cuda(yb, mean.data(), rstd.data(), x, g, P(prm, name + ".bias"), n, D, 1e-5, stream);
  else
    layernorm_forward_cuda(y32, mean.data(), rstd.data(), x, g, P(prm, name + ".bias"), n, D, 1e-5, stream);
}

// dx = (accumulate ? dx + : ) norm backward of dout (fp32 or bf16), and in bf16 precision its copy dxb;
// parameter grads accumulated.
void GpuRunner::Impl::norm_backward(const float* prm, float* grads, Operand dout, const float* x, const Buf& mean,
                                    const Buf& rstd, const std::string& name, bool accumulate, int64_t n) {
  join(kResidualReaders);
  ProfileScope op(prof, "bwd.norm");
  uint16_t* dx16 = bf16() ? dxb.data() : nullptr;
  float* dg = G(grads, name + ".weight");
  const float* g = P(prm, name + ".weight");
  const auto* d16 = static_cast<const uint16_t*>(dout.data);
  const auto* d32 = static_cast<const float*>(dout.data);
  const bool b16 = dout.type == Storage::bf16;
  const ReduceScratch scratch = blas.reduce_scratch();
  if (c.norm == NormKind::rmsnorm && b16)
    rmsnorm_backward_bf16_cuda(dx.data(), dg, d16, x, g, rstd.data(), n, D, stream, scratch, accumulate, dx16);
  else if (c.norm == NormKind::rmsnorm)
    rmsnorm_backward_cuda(dx.data(), dg, d32, x, g, rstd.data(), n, D, stream, scratch, accumulate, dx16);
  else if (b16)
    layernorm_backward_bf16_cuda(dx.data(), dg, G(grads, name + ".bias"), d16, x, g, mean.data(), rstd.data(), n, D,
                                 stream, scratch, accumulate, dx16);
  else
    layernorm_backward_cuda(dx.data(), dg, G(grads, name + ".bias"), d32, x, g, mean.data(), rstd.data(), n, D, stream,
                            scratch, accumulate, dx16);
}

void GpuRunner::Impl::post_norm_backward(const float* prm, float* grads, const float* x, const Buf& mean,
                                         const Buf& rstd, const std::string& name, int64_t n) {
  CUDA_CHECK(cudaMemcpyAsync(dh.data(), dx.data(), n * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  norm_backward(prm, grads, f32_operand(dh.data()), x, mean, rstd, name, false, n);
}

void GpuRunner::Impl::dres_from_dh(int64_t n) {
  join(kResidualReaders);
  CUDA_CHECK(cudaMemcpyAsync(dx.data(), dh.data(), n * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  if (bf16()) f32_to_bf16_cuda(dxb.data(), dx.data(), n * D, stream);
}

void GpuRunner::Impl::input_norm_backward(const float* prm, float* grads, const float* x, const Buf& mean,
                                          const Buf& rstd, const std::string& name, int64_t n) {
  join(kResidualReaders);
  ProfileScope op(prof, "bwd.norm");
  if (post)
    add_bias_cuda(dx.data(), dh.data(), 1, n * D, stream);  // one row of n D: an elementwise add (dxb goes stale:
                                                           // the next reader is a norm backward, which rewrites it)
  else norm_backward(prm, grads, dh_grad(), x, mean, rstd, name, true, n);
}

// q, k, v (RoPE applied), the gate's log f and PaTH's w and beta of every row; the gate's and
// PaTH's w path on the side stream, beside q, k, v (PaTH's beta after them, on the main stream).
void GpuRunner::Impl::attention_inputs(const float* prm, Layer& L, const std::string& p) {
  const Operand h = attn_in(L);
  if (uses_gate(L.kind) || uses_path(L.kind))
    overlap(kAttnInputs, [&](const Blas& b) {
      const cudaStream_t st = b.stream();
      if (uses_gate(L.kind)) {
        ProfileScope op(prof, "fwd.gate");
        linear_forward_cuda(b, f32_target(L.zf.data()), h, W(prm, p + "attn.wf"), P(prm, p + "attn.bf"), N, D, H);
        act_forward_cuda(Act::logsigmoid, L.logf.data(), L.zf.data(), N * H, st);
        if (c.scales_gate(L.kind)) scale_cuda(L.logf.data(), scale, N * H, st);
      }
      if (uses_path(L.kind)) {
        ProfileScope op(prof, "fwd.path_w_beta");
        // u = h w1^T w2^T = h w12^T: one [N, D] x [D, HD] product instead of two through [N, R].
        matmul_f32_cuda(b, L.w12.data(), P(prm, p + "attn.w2"), P(prm, p + "attn.w1"), HD, D, R, false, false, false);
        if (bf16()) f32_to_bf16_cuda(L.w12b.data(), L.w12.data(), HD * D, st);
        linear_forward_cuda(b, f32_target(L.u.data()), h, w12(L), nullptr, N, D, HD);
        const float* conv_bias = has(p + "attn.conv_bias") ? P(prm, p + "attn.conv_bias") : nullptr;
        path_wpath_forward_cuda(L.w.data(), L.u.data(), P(prm, p + "attn.conv"), conv_bias, B, T, H, Dh,
                                static_cast<float>(nn::kPathWNormEps), st);
      }
    });
  // RoPE by rope.cu's kernels (else inside the attention kernels); bf16: fp32 q, k rotated and rounded once
  const bool rope = L.kind == Attention::rope && !L.rope_in_kernel;
  ProfileScope qkv_op(prof, "fwd.qkv");
  auto target = [&](int i) {  // q, k or v where the attention kernels read it
    void* x = qkv_view(L, i);
    return bf16() ? bf16_target(static_cast<uint16_t*>(x)) : f32_target(static_cast<float*>(x));
  };
  if (L.qkv_in_one) {  // wq, wk, wv adjacent: [3 HD, D]
    linear(target(0), h, W(prm, p + "attn.wq"), nullptr, N, D, 3 * HD);
  } else {
    linear(rope ? f32_target(L.q.data()) : target(0), h, W(prm, p + "attn.wq"), nullptr, N, D, HD);
    linear(rope ? f32_target(L.k.data()) : target(1), h, W(prm, p + "attn.wk"), nullptr, N, D, HD);
    linear(target(2), h, W(prm, p + "attn.wv"), nullptr, N, D, HD);
  }
  if (rope && bf16()) {
    rope_forward_bf16_cuda(L.qb.data(), L.q.data(), rope_cs.data(), B, T, H, Dh, stream);
    rope_forward_bf16_cuda(L.kb.data(), L.k.data(), rope_cs.data(), B, T, H, Dh, stream);
  } else if (rope) {
    rope_forward_cuda(L.q.data(), L.q.data(), rope_cs.data(), B, T, H, Dh, stream);
    rope_forward_cuda(L.k.data(), L.k.data(), rope_cs.data(), B, T, H, Dh, stream);
  }
  qkv_op.close();
  if (uses_path(L.kind)) {  // beta after q, k, v: the side stream's w path is the longer branch
    ProfileScope op(prof, "fwd.path_w_beta");
    linear(f32_target(L.zb.data()), h, W(prm, p + "attn.wbeta"), nullptr, N, D, H);
    path_beta_forward_cuda(L.beta.data(), L.zb.data(), P(prm, p + "attn.bbeta"), N, H, beta_max, stream);
  }
}

// The attention of every row: L.att / L.ob and L.lse.
void GpuRunner::Impl::attention_kernel_forward(Layer& L) {
  join(kAttnInputs);
  const float* logf = uses_gate(L.kind) ? L.logf.data() : nullptr;
  const void *q = qkv_view(L, 0), *k = qkv_view(L, 1), *v = qkv_view(L, 2);
  void* o = kernel_view(L.att, L.ob);
  const AttnDims d = attn_dims(L);
  ProfileScope op(prof, "fwd.attention");
  if (uses_path(L.kind))
    path_attention_forward_cuda(o, L.lse.data(), q, k, v, L.w.data(), L.beta.data(), logf, d, scale, attn_dt,
                                ws.data(), ws_bytes, stream, L.factors.data());
  else if (L.kind == Attention::sba)
    sba_attention_forward_cuda(o, q, k, v, dims, scale, attn_dt, c.sba.remainder == SbaRemainder::current, stream);
  else
    softmax_attention_forward_cuda(o, L.lse.data(), q, k, v, logf, d, scale, attn_dt, ws.data(), ws_bytes, stream, {},
                                   L.rope_in_kernel ? rope_cs.data() : nullptr);
}

// From d(attention output) of every row in datt / dob to dq, dk, dv (and dw, dbeta, dlogf): into
// dqb, dkb, dvb, or (packs_in_place) the first 3 HD columns of L's packed operand.
void GpuRunner::Impl::attention_kernel_backward(Layer& L) {
  const bool gate = uses_gate(L.kind);
  void* gq = kernel_view(dq, dqb);
  void* gk = kernel_view(dk, dkb);
  void* gv = kernel_view(dv, dvb);
  AttnDims d = attn_dims(L);
  if (packs_in_place(L)) {
    d.grad_ld = L.kp;
    uint16_t* base = static_cast<uint16_t*>(dproj_of(L));
    gq = base, gk = base + HD, gv = base + 2 * HD;
  }
  const void* dout = kernel_view(datt, dob);
  const void *q = qkv_view(L, 0), *k = qkv_view(L, 1), *v = qkv_view(L, 2);
  const void* o = kernel_view(L.att, L.ob);
  ProfileScope op(prof, "bwd.attention");
  if (uses_path(L.kind))
    path_attention_backward_cuda(gq, gk, gv, dw.data(), dbeta.data(), gate ? dlogf.data() : nullptr, dout, q, k, v,
                                 L.w.data(), L.beta.data(), gate ? L.logf.data() : nullptr, o, L.lse.data(), d, scale,
                                 attn_dt, ws.data(), ws_bytes, stream, L.factors.data());
  else if (L.kind == Attention::sba)
    sba_attention_backward_cuda(gq, gk, gv, dout, q, k, v, dims, scale, attn_dt,
                                c.sba.remainder == SbaRemainder::current, ws.data(), ws_bytes, stream);
  else
    softmax_attention_backward_cuda(gq, gk, gv, gate ? dlogf.data() : nullptr, dout, q, k, v,
                                    gate ? L.logf.data() : nullptr, o, L.lse.data(), d, scale, attn_dt, ws.data(),
                                    ws_bytes, stream, {}, L.rope_in_kernel ? rope_cs.data() : nullptr);
}

// The attention's input projections of h (their weights, rows in the packed order: q, k, v, the
// gate's, PaTH's w12 = w2 w1 and beta) and their gradients: the packed operand's parts.
int GpuRunner::Impl::in_projections(const Layer& L, const std::string& p, InProj* out) const {
  const bool bf = bf16();
  const bool rope32 = L.kind == Attention::rope && !L.rope_in_kernel && !bf;  // fp32 RoPE ops: the un-rotated copies
  // d(q), d(k), d(v): bf16 in bf16 precision (or already in the packed operand); the small gradients
  // are fp32 (rounded by the packing).
  const bool in_place = packs_in_place(L);
  auto act = [&](const Buf& f32, const Bf16Buf& b16) {
    return bf ? PackPart{b16.data(), HD, false, in_place} : PackPart{f32.data(), HD, true};
  };
  int n = 0;
  out[n++] = {p + "attn.wq", act(rope32 ? dq_pre : dq, dqb)};
  out[n++] = {p + "attn.wk", act(rope32 ? dk_pre : dk, dkb)};
  out[n++] = {p + "attn.wv", act(dv, dvb)};
  if (uses_gate(L.kind)) out[n++] = {p + "attn.wf", {dzf.data(), H, true}};
  if (uses_path(L.kind)) {  // du: fp32, or bf16 stored into the packed operand by the w path's backward
    out[n++] = {p + "attn.w1", in_place ? PackPart{du.data(), HD, false, true} : PackPart{du.data(), HD, true}, true};
    out[n++] = {p + "attn.wbeta", {dzb.data(), H, true}};
  }
  return n;
}

// From dq, dk, dv (dw, dbeta, dlogf) to the attention's parameters and d(norm1 input) added to dx.
// The input projections' gradients are packed side by side ([N, K]) with their weights ([K, D]):
// d(h) is one product and their weight gradients another (into dwcat, then added to each; PaTH's
// folded w12's to w1 and w2 by two small products).
void GpuRunner::Impl::attention_inputs_backward(const float* prm, float* grads, Layer& L, const std::string& p) {
  // The packed parts (host work only; folded_row is also du's first column in the packed operand).
  InProj proj[kMaxPackParts];
  const int n = in_projections(L, p, proj);
  PackPart grad_parts[kMaxPackParts], weight_parts[kMaxPackParts];
  AddSegment segs[kMaxPackParts];
  int64_t folded_row = -1;  // the first row of w12's gradient in dwcat
  for (int i = 0, row = 0; i < n; row += static_cast<int>(proj[i].grad.cols), ++i) {
    const Operand w = proj[i].folded ? w12(L) : W(prm, proj[i].weight);
    const int64_t rows = proj[i].grad.cols;
    grad_parts[i] = proj[i].grad;
    weight_parts[i] = {w.data, rows * D, w.type == Storage::f32};
    segs[i] = {proj[i].folded ? nullptr : G(grads, proj[i].weight), rows * D};
    if (proj[i].folded) folded_row = row;
  }
  if (L.kind == Attention::rope && !L.rope_in_kernel) {
    ProfileScope op(prof, "bwd.rope");
    if (bf16()) {  // in place (the kernels that store into the packed operand apply RoPE themselves)
      rope_backward_bf16_cuda(dqb.data(), dqb.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_backward_bf16_cuda(dkb.data(), dkb.data(), rope_cs.data(), B, T, H, Dh, stream);
    } else {
      rope_backward_cuda(dq_pre.data(), dq.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_backward_cuda(dk_pre.data(), dk.data(), rope_cs.data(), B, T, H, Dh, stream);
    }
  }
  if (uses_gate(L.kind)) {
    ProfileScope op(prof, "bwd.gate");
    if (c.scales_gate(L.kind)) scale_cuda(dlogf.data(), scale, N * H, stream);
    act_backward_cuda(Act::logsigmoid, dzf.data(), dlogf.data(), L.zf.data(), N * H, stream);
    bias_backward_cuda(G(grads, p + "attn.bf"), dzf.data(), N, H, stream, blas.reduce_scratch());
  }
  if (uses_path(L.kind)) {
    ProfileScope op(prof, "bwd.path_w_beta");
    const bool bias = has(p + "attn.conv_bias");
    uint16_t* du16 = nullptr;  // with dq, dk, dv in the packed operand, du goes there too (in_projections)
    if (packs_in_place(L)) du16 = static_cast<uint16_t*>(dproj_of(L)) + folded_row;
    path_wpath_backward_cuda(du16 ? nullptr : du.data(), G(grads, p + "attn.conv"),
                             bias ? G(grads, p + "attn.conv_bias") : nullptr, dconv.data(), dw.data(), L.u.data(),
                             P(prm, p + "attn.conv"), bias ? P(prm, p + "attn.conv_bias") : nullptr, B, T, H, Dh,
                             static_cast<float>(nn::kPathWNormEps), stream, blas.reduce_scratch(), du16, L.kp);
    path_beta_backward_cuda(dzb.data(), G(grads, p + "attn.bbeta"), dbeta.data(), L.zb.data(), N, H, beta_max, stream,
                            blas.reduce_scratch());
  }
  ProfileScope proj_op(prof, "bwd.qkv");
  const int64_t kp = L.kp;
  join(kProjGrad);  // the weight gradients of the layer before read dproj (fp32; in bf16 the other half)
  void* dproj_data = dproj_of(L);
  pack_columns_cuda(dproj_data, !bf16(), kp, grad_parts, n, N, stream);
  pack_columns_cuda(kernel_view(wcatf, wcatb), !bf16(), kp * D, weight_parts, n, 1, stream);  // one row: [kp, D]
  const Operand dproj = bf16() ? bf16_operand(static_cast<uint16_t*>(dproj_data)) : f32_operand(dprojf.data());
  const Operand wcat = in(wcatf, wcatb);
  linear_backward_cuda(blas, dh_target(), nullptr, dproj, attn_in(L), wcat, N, D, kp, false);
  overlap(kProjGrad, [&](const Blas& b) {
    CUDA_CHECK(cudaMemsetAsync(dwcat.data(), 0, kp * D * sizeof(float), b.stream()));
    linear_backward_cuda(b, f32_target(nullptr), dwcat.data(), dproj, attn_in(L), wcat, N, D, kp, false);
    add_segments_cuda(dwcat.data(), segs, n, b.stream());
    if (folded_row >= 0) {  // d(w12) [HD, D] to PaTH's pair: dw1 += w2^T d(w12), dw2 += d(w12) w1^T
      const float* dw12 = dwcat.data() + folded_row * D;
      matmul_f32_cuda(b, G(grads, p + "attn.w1"), P(prm, p + "attn.w2"), dw12, R, D, HD, true, false, true);
      matmul_f32_cuda(b, G(grads, p + "attn.w2"), dw12, P(prm, p + "attn.w1"), HD, R, D, false, true, true);
    }
  });
  proj_op.close();
  input_norm_backward(prm, grads, L.x_in.data(), L.mean1, L.rstd1, p + "norm1", N);
}

// x_next = x_mid + MLP(norm2(x_mid)) over the first n rows; post-norm: x_next = norm2(y1 + MLP(y1)).
void GpuRunner::Impl::mlp_forward(const float* prm, Layer& L, const std::string& p, float* x_next, int64_t n) {
  if (!post)
    norm_forward(prm, out(L.h2, L.h2b), L.mean2, L.rstd2, L.x_mid.data(), p + "norm2", n);
  else if (bf16())
    f32_to_bf16_cuda(L.h2b.data(), L.y1.data(), n * D, stream);
  const bool glu = c.mlp == MlpKind::swiglu;
  const std::string w_in = p + (glu ? "mlp.w_gate_up" : "mlp.w_in"), w_out = p + (glu ? "mlp.w_down" : "mlp.w_out");
  const int64_t f_in = glu ? 2 * F : F;
  if (swiglu_up_fused(n)) {  // bf16 SwiGLU: the product and the SwiGLU in one kernel
    ProfileScope op(prof, "fwd.mlp_in");
    swiglu_up_forward_bf16_cuda(L.gb.data(), L.sb.data(), L.h2b.data(), static_cast<const uint16_t*>(W(prm, w_in).data),
                                n, D, F, stream);
  } else {
    {
      ProfileScope op(prof, "fwd.mlp_in");
      linear(out(L.g, L.gb), mlp_in(L), W(prm, w_in), nullptr, n, D, f_in);
    }
    ProfileScope act_op(prof, "fwd.mlp_act");
    if (glu && bf16()) swiglu_forward_bf16_cuda(L.sb.data(), L.gb.data(), n, F, stream);
    else if (glu) swiglu_forward_cuda(L.s.data(), L.g.data(), n, F, stream);
    else if (bf16()) act_forward_bf16_cuda(Act::gelu, L.sb.data(), L.gb.data(), n * F, stream);
    else act_forward_cuda(Act::gelu, L.s.data(), L.g.data(), n * F, stream);
  }
  ProfileScope out_op(prof, "fwd.mlp_out");
  if (post) {
    linear_forward_residual_cuda(blas, L.r2.data(), in(L.s, L.sb), W(prm, w_out), L.y1.data(), n, F, D);
    out_op.close();
    norm_forward(prm, f32_target(x_next), L.mean2, L.rstd2, L.r2.data(), p + "norm2", n);
  } else {
    linear_forward_residual_cuda(blas, x_next, in(L.s, L.sb), W(prm, w_out), L.x_mid.data(), n, F, D);
  }
}

// dx: d(x_next) -> d(x_mid) (post-norm: d(y1)), over the first n rows.
void GpuRunner::Impl::mlp_backward(const float* prm, float* grads, Layer& L, const std::string& p, int64_t n) {
  if (post) post_norm_backward(prm, grads, L.r2.data(), L.mean2, L.rstd2, p + "norm2", n);
  const bool glu = c.mlp == MlpKind::swiglu;
  const std::string w_in = p + (glu ? "mlp.w_gate_up" : "mlp.w_in"), w_out = p + (glu ? "mlp.w_down" : "mlp.w_out");
  const int64_t f_in = glu ? 2 * F : F;
  ProfileScope out_op(prof, "bwd.mlp_out");
  const bool fused = swiglu_down_fused(n);
  if (!fused)  // else d(s) stays inside the fused kernel below
    linear_backward_cuda(blas, out(ds, dsb), nullptr, dres(), in(L.s, L.sb), W(prm, w_out), n, F, D, false);
  overlap(kResidualReaders, [&](const Blas& b) {
    linear_backward_cuda(b, f32_target(nullptr), G(grads, w_out), dres(), in(L.s, L.sb), W(prm, w_out), n, F, D,
                         false);
  });
  out_op.close();
  join(kMlpGrad);  // the previous layer's w_in gradient reads dg
  ProfileScope act_op(prof, "bwd.mlp_act");
  if (fused)
    swiglu_down_backward_bf16_cuda(dgb.data(), dxb.data(), static_cast<const uint16_t*>(W(prm, w_out).data),
                                   L.gb.data(), n, D, F, stream);
  else if (glu && bf16()) swiglu_backward_bf16_cuda(dgb.data(), dsb.data(), L.gb.data(), n, F, stream);
  else if (glu)
    swiglu_backward_cuda(dg.data(), ds.data(), L.g.data(), n, F, stream);
  else if (bf16())
    act_backward_bf16_cuda(Act::gelu, dgb.data(), dsb.data(), L.gb.data(), n * F, stream);
  else
    act_backward_cuda(Act::gelu, dg.data(), ds.data(), L.g.data(), n * F, stream);
  act_op.close();
  ProfileScope in_op(prof, "bwd.mlp_in");
  linear_backward_cuda(blas, dh_target(), nullptr, in(dg, dgb), mlp_in(L), W(prm, w_in), n, D, f_in, false);
  overlap(kMlpGrad, [&](const Blas& b) {
    linear_backward_cuda(b, f32_target(nullptr), G(grads, w_in), in(dg, dgb), mlp_in(L), W(prm, w_in), n, D, f_in,
                         false);
  });
  in_op.close();
  input_norm_backward(prm, grads, L.x_mid.data(), L.mean2, L.rstd2, p + "norm2", n);
}

// Embedding, layers and the final norm: fixed shapes, one CUDA graph. With a rows tail (pruned())
// the last layer stops after its attention inputs (and, without rows attention, its attention).
void GpuRunner::Impl::forward_layers(const float* prm) {
  float* x0 = layers.empty() ? x_final.data() : layers[0].x_in.data();
  if (bf16()) {
    ProfileScope op(prof, "fwd.weights_bf16");
    f32_to_bf16_cuda(wb.data(), prm + wb_begin, wb.size(), stream);  // this step's layer weights
  }
  {
    ProfileScope op(prof, "fwd.embedding");
    embedding_forward_cuda(x0, ids, P(prm, "embed.weight"), N, V, D, stream);
    if (c.position == PositionKind::learned)  // x[b, t] += pos[t]: a bias over rows of T D
      add_bias_cuda(x0, P(prm, "pos.weight"), B, T * D, stream);
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    Layer& L = layers[l];
    const std::string p = Transformer<float>::layer_prefix(l);
    if (!post)
      norm_forward(prm, out(L.h1, L.h1b), L.mean1, L.rstd1, L.x_in.data(), p + "norm1", N);
    else if (bf16())
      f32_to_bf16_cuda(L.h1b.data(), L.x_in.data(), N * D, stream);
    attention_inputs(prm, L, p);
    if (pruned() && l + 1 == c.n_layers) {
      if (!rows_attention()) attention_kernel_forward(L);
      join_all();  // the rows tail (after the graph) reads w and beta
      return;
    }
    attention_kernel_forward(L);
    {
      ProfileScope op(prof, "fwd.out_proj");
      linear_forward_residual_cuda(blas, L.x_mid.data(), in(L.att, L.ob), W(prm, p + "attn.wo"), L.x_in.data(), N, HD,
                                   D);
    }
    if (post) norm_forward(prm, f32_target(L.y1.data()), L.mean1, L.rstd1, L.x_mid.data(), p + "norm1", N);
    float* x_next = l + 1 < c.n_layers ? layers[l + 1].x_in.data() : x_final.data();
    if (c.mlp != MlpKind::none)
      mlp_forward(prm, L, p, x_next, N);
    else
      CUDA_CHECK(cudaMemcpyAsync(x_next, (post ? L.y1 : L.x_mid).data(), N * D * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
  }
  if (post)  // no final norm
    CUDA_CHECK(cudaMemcpyAsync(hf.data(), x_final.data(), N * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  else
    norm_forward(prm, f32_target(hf.data()), meanf, rstdf, x_final.data(), "norm_f", N);  // the head stays fp32
}

// From d(final norm output) in dh (or, after a rows tail, from d(last layer's attention inputs)) to
// the embedding gradient: fixed shapes, one CUDA graph.
void GpuRunner::Impl::backward_layers(const float* prm, float* grads) {
  int64_t l = c.n_layers - 1;
  if (pruned()) {
    const std::string p = Transformer<float>::layer_prefix(l);
    attention_inputs_backward(prm, grads, layers[l], p);
    --l;
  } else if (post) {
    dres_from_dh(N);
  } else {
    norm_backward(prm, grads, f32_operand(dh.data()), x_final.data(), meanf, rstdf, "norm_f", false, N);
  }
  for (; l >= 0; --l) {
    Layer& L = layers[l];
    const std::string p = Transformer<float>::layer_prefix(l);
    if (c.mlp != MlpKind::none) mlp_backward(prm, grads, L, p, N);
    if (post) post_norm_backward(prm, grads, L.x_mid.data(), L.mean1, L.rstd1, p + "norm1", N);
    {
      ProfileScope op(prof, "bwd.out_proj");
      linear_backward_cuda(blas, out(datt, dob), nullptr, dres(), in(L.att, L.ob), W(prm, p + "attn.wo"), N, HD, D,
                           false);
      overlap(kResidualReaders, [&](const Blas& b) {
        linear_backward_cuda(b, f32_target(nullptr), G(grads, p + "attn.wo"), dres(), in(L.att, L.ob),
                             W(prm, p + "attn.wo"), N, HD, D, false);
      });
    }
    attention_kernel_backward(L);
    attention_inputs_backward(prm, grads, L, p);
  }
  join_all();  // the graph ends with every weight gradient in place
  ProfileScope op(prof, "bwd.embedding");
  embedding_backward_cuda(G(grads, "embed.weight"), dx.data(), embed_index, N, V, D, stream, blas.reduce_scratch());
  if (c.position == PositionKind::learned)  // dpos[t] += sum_b dx[b, t]: column sums over rows of T D
    bias_backward_cuda(G(grads, "pos.weight"), dx.data(), B, T * D, stream, blas.reduce_scratch());
}

// The last layer from its attention on, over the Mt rows (the labelled ones, then
// padding): attention output rows, x_mid =
// x_in + o Wo, the MLP into x_final and the final norm into hf_rows (first Mt rows of each buffer).
void GpuRunner::Impl::forward_rows_tail(const float* prm) {
  Layer& L = layers.back();
  const std::string p = Transformer<float>::layer_prefix(c.n_layers - 1);
  void* o_rows = kernel_view(att_rows, att_rowsb);
  if (rows_attention()) {
    path_attention_rows_forward_cuda(
        o_rows, lse_rows.data(), kernel_view(L.q, L.qb), kernel_view(L.k, L.kb), kernel_view(L.v, L.vb), L.w.data(),
        L.beta.data(), uses_gate(L.kind) ? L.logf.data() : nullptr, rows, row_starts, Mt, dims, scale, attn_dt,
        trains ? rows_ws.data() : nullptr, static_cast<size_t>(rows_ws.size()), stream);
    gather_rows_cuda(x_rows.data(), L.x_in.data(), D, nullptr, nullptr, 0, false, rows, Mt, stream);
  } else {  // the attention's output rows with the residual's
    gather_rows_cuda(x_rows.data(), L.x_in.data(), D, o_rows, kernel_view(L.att, L.ob), HD, bf16(), rows, Mt, stream);
  }
  linear_forward_residual_cuda(blas, L.x_mid.data(), in(att_rows, att_rowsb), W(prm, p + "attn.wo"), x_rows.data(), Mt,
                               HD, D);
  if (post) norm_forward(prm, f32_target(L.y1.data()), L.mean1, L.rstd1, L.x_mid.data(), p + "norm1", Mt);
  if (c.mlp != MlpKind::none)
    mlp_forward(prm, L, p, x_final.data(), Mt);
  else
    CUDA_CHECK(cudaMemcpyAsync(x_final.data(), (post ? L.y1 : L.x_mid).data(), Mt * D * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream));
  if (post)
    CUDA_CHECK(cudaMemcpyAsync(hf_rows.data(), x_final.data(), Mt * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  else
    norm_forward(prm, f32_target(hf_rows.data()), meanf, rstdf, x_final.data(), "norm_f", Mt);
}

// Backward of forward_rows_tail from d(hf_rows) in dh: leaves d(x_in) of the last layer's residual
// in dx (zero off the labelled rows) and the attention kernel's gradients in dq, dk, dv (dw, dbeta,
// dlogf), for backward_layers to go on from.
void GpuRunner::Impl::backward_rows_tail(const float* prm, float* grads) {
  Layer& L = layers.back();
  const std::string p = Transformer<float>::layer_prefix(c.n_layers - 1);
  if (post)
    dres_from_dh(Mt);
  else norm_backward(prm, grads, f32_operand(dh.data()), x_final.data(), meanf, rstdf, "norm_f", false, Mt);
  if (c.mlp != MlpKind::none) mlp_backward(prm, grads, L, p, Mt);
  if (post) post_norm_backward(prm, grads, L.x_mid.data(), L.mean1, L.rstd1, p + "norm1", Mt);
  linear_backward_cuda(blas, out(datt_rows, datt_rowsb), G(grads, p + "attn.wo"), dres(), in(att_rows, att_rowsb),
                       W(prm, p + "attn.wo"), Mt, HD, D, false);
  CUDA_CHECK(cudaMemcpyAsync(dres_rows.data(), dx.data(), Mt * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  join_all();  // before dx is rewritten, and before the backward graph (no side work may cross into it)
  if (rows_attention()) {  // d(x_in) on every row, zero off the labelled ones
    expand_rows_cuda(dx.data(), dres_rows.data(), D, nullptr, nullptr, 0, false, row_of, N, stream);
    const bool gate = uses_gate(L.kind);
    path_attention_rows_backward_cuda(
        kernel_view(dq, dqb), kernel_view(dk, dkb), kernel_view(dv, dvb), dw.data(), dbeta.data(),
        gate ? dlogf.data() : nullptr, kernel_view(datt_rows, datt_rowsb), kernel_view(att_rows, att_rowsb),
        lse_rows.data(), kernel_view(L.q, L.qb), kernel_view(L.k, L.kb), kernel_view(L.v, L.vb), L.w.data(),
        L.beta.data(), gate ? L.logf.data() : nullptr, rows, row_starts, Mt, dims, scale, attn_dt,
        rows_ws.data(), static_cast<size_t>(rows_ws.size()), stream);
    return;
  }
  // The residual's rows with the attention output's, zero off the labelled ones.
  expand_rows_cuda(dx.data(), dres_rows.data(), D, kernel_view(datt, dob), kernel_view(datt_rows, datt_rowsb), HD,
                   bf16(), row_of, N, stream);
  attention_kernel_backward(L);
}

}  // namespace sb::cuda
