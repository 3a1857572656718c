// gpu_runner.cpp: GpuRunner, the device forward/backward of the transformer (mirrors
// src/model/runner.cpp op for op; activation gradients are overwritten, parameter gradients
// accumulated; residual gradients are summed explicitly). Attention: kernels/attention_cuda.hpp.
// bf16 precision stores the products' activations as bf16 (ops_bf16.hpp), reading the weights from a
// bf16 mirror of the parameters made at each forward.
#include "kernels/gpu_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/attention_cuda.hpp"
#include "kernels/ops_bf16.hpp"
#include "kernels/ops_cuda.hpp"
#include "kernels/stream_graph.hpp"
#include "nn/path_wpath.hpp"

namespace sb::cuda {

template <class T>
void DeviceArray<T>::resize(int64_t n) {
  if (n == n_ && p_) return;
  release();
  if (n > 0) {
    CUDA_CHECK(cudaMalloc(&p_, static_cast<size_t>(n) * sizeof(T)));
    CUDA_CHECK(cudaMemset(p_, 0, static_cast<size_t>(n) * sizeof(T)));
    // cudaMemset runs on the legacy default stream, which the engines' non-blocking streams do not
    // wait for: without this, a first upload on such a stream could land before the zeroing and be
    // wiped (seen as a wrong first loss when another process loaded the GPU).
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  n_ = n;
}

template <class T>
void DeviceArray<T>::release() noexcept {
  if (p_) cudaFree(p_);
  p_ = nullptr, n_ = 0;
}

template class DeviceArray<float>;
template class DeviceArray<double>;
template class DeviceArray<int32_t>;
template class DeviceArray<uint8_t>;
template class DeviceArray<uint16_t>;
template class DeviceArray<char>;

namespace {
bool uses_path(Attention a) { return a == Attention::path || a == Attention::path_fox; }
bool uses_gate(Attention a) { return a == Attention::fox || a == Attention::path_fox; }
using Buf = DeviceArray<float>;
using Bf16Buf = DeviceArray<uint16_t>;

// One pinned host slot for a batch upload ([ids N | rows N | row labels N | embedding index] int32) and the event
// that marks its copy as consumed by the stream.
struct StagingSlot {
  int32_t* host = nullptr;
  cudaEvent_t copied = nullptr;
  explicit StagingSlot(int64_t ints) {
    CUDA_CHECK(cudaMallocHost(&host, static_cast<size_t>(ints) * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  }
  ~StagingSlot() {
    if (copied) cudaEventDestroy(copied);
    if (host) cudaFreeHost(host);
  }
  StagingSlot(const StagingSlot&) = delete;
  StagingSlot& operator=(const StagingSlot&) = delete;
};
}  // namespace

struct GpuRunner::Impl {
  struct Layer {
    Attention kind;
    // fp32 precisions use the Buf of an activation, bf16 precision its Bf16Buf (never both).
    Buf x_in, h1, mean1, rstd1, q, k, v, zf, logf, a1, u, conv, w, zb, beta, att, lse, x_mid, h2, mean2, rstd2, g, s;
    Bf16Buf h1b, h2b, qb, kb, vb, ob, gb, sb;  // [N, D] h1b h2b, [N, HD] qb kb vb ob, [N, f_in] gb, [N, F] sb
    DeviceArray<char> factors;  // PaTH: the forward's factors, reused by the backward
  };

  const Transformer<float>& model;
  const ModelConfig& c;
  Blas blas;
  cudaStream_t stream;
  bool trains;  // false: an evaluation runner (forward only, no gradient buffers)
  int64_t B, T, N, D, H, Dh, HD, F, V, R, M = 0;
  float scale, beta_max;
  AttnDims dims;
  std::vector<Layer> layers;
  DType attn_dt;                // F32 (fp32 / tf32 precision) or BF16 (bf16 precision)
  DeviceArray<int32_t> batch;   // [3N + embedding_index_ints(N)]: ids | rows | row labels (first M used) | embedding index
  int32_t *ids = nullptr, *rows = nullptr, *row_labels = nullptr, *embed_index = nullptr;  // views of batch
  std::vector<int32_t> id_counts;  // [V] host scratch of embedding_index_build
  std::vector<int32_t> host_rows, host_row_labels;
  std::unique_ptr<StagingSlot> staging[2];  // pinned, alternating: the host fills one while the other's copy may be pending
  int next_slot = 0;
  StreamGraph forward_graph, backward_graph;  // the layer stacks (fixed shapes); the head runs eagerly (M varies)
  Buf x_final, hf, meanf, rstdf, hf_rows, losses;
  Buf rope_cs;  // [T, Dh/2, 2] RoPE (cos, sin), filled once (rope_table_cuda)
  Buf logits, dlogits;  // [head_rows, V]: sized to the most labelled rows seen (grown on demand, not N x V)
  int64_t head_rows = 0;
  DeviceArray<double> loss_sum;
  DeviceArray<char> ws;  // attention workspace (max over calls)
  size_t ws_bytes = 0;
  bool have_forward = false;
  Buf dx, dh, datt, dq, dk, dv, dq_pre, dk_pre, dw, du, da1, dconv, dlogf, dzf, dbeta, dzb, dg, ds, dhf_rows;
  // bf16 precision: [N, D] dxb (bf16 copy of dx), [N, HD] dob dqb dkb dvb, [N, f_in] dgb, [N, F] dsb,
  // [N, max(H, R)] dsmall (a bf16 copy of one small fp32 gradient: the gate's, beta's or a1's).
  Bf16Buf dxb, dob, dqb, dkb, dvb, dgb, dsb, dsmall;
  // bf16 precision: bf16 copy of the parameters [wb_begin, wb_begin + wb.size()), the span of the
  // layers' views (what the products read; embedding and head stay fp32), made by each forward.
  Bf16Buf wb;
  int64_t wb_begin = 0;

  Impl(const Transformer<float>& m, int64_t b, int64_t t, MatmulPrecision prec, cudaStream_t st, bool graphs,
       bool train)
      : model(m), c(m.config()), blas(prec, st), stream(st), trains(train), B(b), T(t), N(b * t), D(c.d_model),
        H(c.n_heads),
        Dh(c.head_dim), HD(c.n_heads * c.head_dim), F(c.mlp_hidden()), V(m.vocab_size()), R(c.path.rank),
        attn_dt(prec == MatmulPrecision::bf16 ? DType::BF16 : DType::F32), forward_graph(graphs),
        backward_graph(graphs) {
    if (B < 1 || T < 1) fail("gpu runner: batch {} and length {} must be >= 1", B, T);
    scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
    beta_max = static_cast<float>(c.path.beta_clamp > 0 ? c.path.beta_clamp : 2.0);
    dims.B = B, dims.T = T, dims.H = H, dims.Dh = Dh;
    const int64_t f_in = c.mlp == MlpKind::swiglu ? 2 * F : F;
    const bool bf = bf16();
    bool any_path = false, any_rope = false, any_gate = false;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      Layer L;
      L.kind = c.layer_attention(l);
      L.x_in.resize(N * D), L.mean1.resize(N), L.rstd1.resize(N);
      if (bf && L.kind == Attention::rope) L.q.resize(N * HD), L.k.resize(N * HD);  // rotated, then rounded once
      if (bf)
        L.h1b.resize(N * D), L.qb.resize(N * HD), L.kb.resize(N * HD), L.vb.resize(N * HD), L.ob.resize(N * HD);
      else
        L.h1.resize(N * D), L.q.resize(N * HD), L.k.resize(N * HD), L.v.resize(N * HD), L.att.resize(N * HD);
      if (uses_gate(L.kind)) L.zf.resize(N * H), L.logf.resize(N * H), any_gate = true;
      if (uses_path(L.kind)) {
        L.a1.resize(N * R), L.u.resize(N * HD), L.conv.resize(N * HD), L.w.resize(N * HD);
        L.zb.resize(N * H), L.beta.resize(N * H);
        L.factors.resize(static_cast<int64_t>(path_attention_factors_bytes(dims, attn_dt)));
        any_path = true;
      }
      any_rope |= L.kind == Attention::rope;
      L.lse.resize(B * H * T), L.x_mid.resize(N * D);
      if (c.mlp != MlpKind::none) {
        L.mean2.resize(N), L.rstd2.resize(N);
        if (bf)
          L.h2b.resize(N * D), L.gb.resize(N * f_in), L.sb.resize(N * F);
        else
          L.h2.resize(N * D), L.g.resize(N * f_in), L.s.resize(N * F);
      }
      const size_t fwd_ws = uses_path(L.kind) ? path_attention_forward_workspace_bytes(dims, attn_dt, true)
                                              : softmax_attention_forward_workspace_bytes(dims, attn_dt);
      const size_t bwd_ws = !trains              ? 0
                            : uses_path(L.kind) ? path_attention_backward_workspace_bytes(dims, attn_dt, true)
                                                : softmax_attention_backward_workspace_bytes(dims, attn_dt);
      ws_bytes = std::max({ws_bytes, fwd_ws, bwd_ws});
      layers.push_back(std::move(L));
    }
    ws.resize(static_cast<int64_t>(ws_bytes));
    if (any_rope) rope_cs.resize(T * Dh), rope_table_cuda(rope_cs.data(), T, Dh, c.rope_theta, stream);
    batch.resize(batch_ints());
    ids = batch.data(), rows = batch.data() + N, row_labels = batch.data() + 2 * N, embed_index = batch.data() + 3 * N;
    id_counts.resize(V);
    for (auto& slot : staging) slot = std::make_unique<StagingSlot>(batch_ints());
    x_final.resize(N * D), hf.resize(N * D), meanf.resize(N), rstdf.resize(N);
    hf_rows.resize(N * D), losses.resize(N), loss_sum.resize(1);
    if (bf) {
      int64_t end = 0;
      wb_begin = model.params().size();
      for (const ParamView& v : model.params().views()) {
        if (v.name.rfind("layers.", 0) != 0) continue;
        wb_begin = std::min(wb_begin, v.offset), end = std::max(end, v.offset + v.numel);
      }
      wb.resize(std::max<int64_t>(0, end - wb_begin));
    }
    if (!trains) return;  // an evaluation runner: no gradient buffers, the forward's workspace only
    dx.resize(N * D), dh.resize(N * D);
    if (bf) {
      dxb.resize(N * D), dob.resize(N * HD), dqb.resize(N * HD), dkb.resize(N * HD), dvb.resize(N * HD);
      dsmall.resize(N * std::max(H, R));
    } else {
      datt.resize(N * HD), dq.resize(N * HD), dk.resize(N * HD), dv.resize(N * HD);
      if (any_rope) dq_pre.resize(N * HD), dk_pre.resize(N * HD);
    }
    if (any_path) {
      dw.resize(N * HD), du.resize(N * HD), dconv.resize(N * HD), da1.resize(N * R), dbeta.resize(N * H);
      dzb.resize(N * H);
    }
    if (any_gate) dlogf.resize(N * H), dzf.resize(N * H);
    if (c.mlp != MlpKind::none && bf) dgb.resize(N * f_in), dsb.resize(N * F);
    if (c.mlp != MlpKind::none && !bf) dg.resize(N * f_in), ds.resize(N * F);
    dhf_rows.resize(N * D);
  }

  // Grows logits / dlogits to hold M rows (by half again, capped at N). Tasks label a fraction of
  // the positions (MQRAR: 32 of 768), so N x V buffers would waste most of a cell's memory. Waits
  // for the stream first: the previous step may still read the old buffers.
  void ensure_head_rows(int64_t rows) {
    if (rows <= head_rows) return;
    head_rows = std::min(N, std::max(rows, head_rows + head_rows / 2));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    logits.resize(head_rows * V);
    if (trains) dlogits.resize(head_rows * V);
  }

  bool bf16() const { return attn_dt == DType::BF16; }
  // An activation as a product's operand / output, or an attention kernel's pointer: its bf16 buffer
  // in bf16 precision, else its fp32 one.
  Operand in(const Buf& f32, const Bf16Buf& b16) const {
    return bf16() ? bf16_operand(b16.data()) : f32_operand(f32.data());
  }
  Target out(Buf& f32, Bf16Buf& b16) const { return bf16() ? bf16_target(b16.data()) : f32_target(f32.data()); }
  void* kernel_view(const Buf& f32, const Bf16Buf& b16) const {
    return bf16() ? static_cast<void*>(b16.data()) : static_cast<void*>(f32.data());
  }

  const float* P(const float* params, const std::string& name) const { return params + model.params().view(name).offset; }
  float* G(float* grads, const std::string& name) const { return grads + model.params().view(name).offset; }
  bool has(const std::string& name) const { return model.params().contains(name); }
  // A weight as a product's operand: from the bf16 mirror in bf16 precision.
  Operand W(const float* params, const std::string& name) const {
    return bf16() ? bf16_operand(wb.data() + (model.params().view(name).offset - wb_begin))
                  : f32_operand(P(params, name));
  }
  // The residual gradient dx as the products' dout: itself, or in bf16 precision its bf16 copy dxb,
  // which every norm backward writes beside dx (norm_backward).
  Operand dres() const { return bf16() ? bf16_operand(dxb.data()) : f32_operand(dx.data()); }
  // A small fp32 gradient [N, cols] (the gate's, beta's, a1's) as a dout: bf16 precision copies it to dsmall.
  Operand small_grad(const Buf& g, int64_t cols) {
    if (!bf16()) return f32_operand(g.data());
    f32_to_bf16_cuda(dsmall.data(), g.data(), N * cols, stream);
    return bf16_operand(dsmall.data());
  }

  void linear(Target y, Operand x, Operand w, const float* b, int64_t n, int64_t i, int64_t o) {
    linear_forward_cuda(blas, y, x, w, b, n, i, o);
  }

  void norm_forward(const float* prm, Target y, Buf& mean, Buf& rstd, const float* x, const std::string& name) {
    const float* g = P(prm, name + ".weight");
    const bool y16 = y.type == Storage::bf16;
    auto* y32 = static_cast<float*>(y.data);
    auto* yb = static_cast<uint16_t*>(y.data);
    if (c.norm == NormKind::rmsnorm && y16)
      rmsnorm_forward_bf16_cuda(yb, rstd.data(), x, g, N, D, 1e-6, stream);
    else if (c.norm == NormKind::rmsnorm)
      rmsnorm_forward_cuda(y32, rstd.data(), x, g, N, D, 1e-6, stream);
    else if (y16)
      layernorm_forward_bf16_cuda(yb, mean.data(), rstd.data(), x, g, P(prm, name + ".bias"), N, D, 1e-5, stream);
    else
      layernorm_forward_cuda(y32, mean.data(), rstd.data(), x, g, P(prm, name + ".bias"), N, D, 1e-5, stream);
  }
  // dx = (accumulate ? dx + : ) norm backward of dout, and in bf16 precision its copy dxb; parameter
  // grads accumulated.
  void norm_backward(const float* prm, float* grads, const float* dout, const float* x, const Buf& mean,
                     const Buf& rstd, const std::string& name, bool accumulate) {
    uint16_t* dx16 = bf16() ? dxb.data() : nullptr;
    if (c.norm == NormKind::rmsnorm)
      rmsnorm_backward_cuda(dx.data(), G(grads, name + ".weight"), dout, x, P(prm, name + ".weight"), rstd.data(), N,
                            D, stream, blas.reduce_scratch(), accumulate, dx16);
    else
      layernorm_backward_cuda(dx.data(), G(grads, name + ".weight"), G(grads, name + ".bias"), dout, x,
                              P(prm, name + ".weight"), mean.data(), rstd.data(), N, D, stream,
                              blas.reduce_scratch(), accumulate, dx16);
  }

  void attention_forward(const float* prm, Layer& L, const std::string& p) {
    const Operand h = in(L.h1, L.h1b);
    const bool rope = L.kind == Attention::rope;  // bf16 precision: fp32 q, k, rotated and rounded once
    linear(rope ? f32_target(L.q.data()) : out(L.q, L.qb), h, W(prm, p + "attn.wq"), nullptr, N, D, HD);
    linear(rope ? f32_target(L.k.data()) : out(L.k, L.kb), h, W(prm, p + "attn.wk"), nullptr, N, D, HD);
    linear(out(L.v, L.vb), h, W(prm, p + "attn.wv"), nullptr, N, D, HD);
    if (rope && bf16()) {
      rope_forward_bf16_cuda(L.qb.data(), L.q.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_forward_bf16_cuda(L.kb.data(), L.k.data(), rope_cs.data(), B, T, H, Dh, stream);
    } else if (rope) {
      rope_forward_cuda(L.q.data(), L.q.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_forward_cuda(L.k.data(), L.k.data(), rope_cs.data(), B, T, H, Dh, stream);
    }
    const float* logf = nullptr;
    if (uses_gate(L.kind)) {
      linear(f32_target(L.zf.data()), h, W(prm, p + "attn.wf"), P(prm, p + "attn.bf"), N, D, H);
      act_forward_cuda(Act::logsigmoid, L.logf.data(), L.zf.data(), N * H, stream);
      logf = L.logf.data();
    }
    if (uses_path(L.kind)) {
      linear(f32_target(L.a1.data()), h, W(prm, p + "attn.w1"), nullptr, N, D, R);
      linear_forward_cuda(blas, L.u.data(), L.a1.data(), P(prm, p + "attn.w2"), nullptr, N, R, HD);
      const float* conv_bias = has(p + "attn.conv_bias") ? P(prm, p + "attn.conv_bias") : nullptr;
      path_wpath_forward_cuda(L.w.data(), L.conv.data(), L.u.data(), P(prm, p + "attn.conv"), conv_bias, B, T, H, Dh,
                              static_cast<float>(nn::kPathWNormEps), stream);
      linear(f32_target(L.zb.data()), h, W(prm, p + "attn.wbeta"), P(prm, p + "attn.bbeta"), N, D, H);
      path_beta_forward_cuda(L.beta.data(), L.zb.data(), N * H, beta_max, stream);
    }
    const void* q = kernel_view(L.q, L.qb);
    const void* k = kernel_view(L.k, L.kb);
    const void* v = kernel_view(L.v, L.vb);
    void* o = kernel_view(L.att, L.ob);
    if (uses_path(L.kind))
      path_attention_forward_cuda(o, L.lse.data(), q, k, v, L.w.data(), L.beta.data(), logf, dims, scale, attn_dt,
                                  ws.data(), ws_bytes, stream, L.factors.data());
    else
      softmax_attention_forward_cuda(o, L.lse.data(), q, k, v, logf, dims, scale, attn_dt, ws.data(), ws_bytes, stream);
  }

  // dx holds d(x_mid) on entry and d(x_in) on exit.
  void attention_backward(const float* prm, float* grads, Layer& L, const std::string& p) {
    linear_backward_cuda(blas, out(datt, dob), G(grads, p + "attn.wo"), dres(), in(L.att, L.ob), W(prm, p + "attn.wo"),
                         N, HD, D, false);
    const bool gate = uses_gate(L.kind);
    void* gq = kernel_view(dq, dqb);
    void* gk = kernel_view(dk, dkb);
    void* gv = kernel_view(dv, dvb);
    const void* dout = kernel_view(datt, dob);
    const void* q = kernel_view(L.q, L.qb);
    const void* k = kernel_view(L.k, L.kb);
    const void* v = kernel_view(L.v, L.vb);
    const void* o = kernel_view(L.att, L.ob);
    if (uses_path(L.kind))
      path_attention_backward_cuda(gq, gk, gv, dw.data(), dbeta.data(), gate ? dlogf.data() : nullptr, dout, q, k, v,
                                   L.w.data(), L.beta.data(), gate ? L.logf.data() : nullptr, o, L.lse.data(), dims,
                                   scale, attn_dt, ws.data(), ws_bytes, stream, L.factors.data());
    else
      softmax_attention_backward_cuda(gq, gk, gv, gate ? dlogf.data() : nullptr, dout, q, k, v,
                                      gate ? L.logf.data() : nullptr, o, L.lse.data(), dims, scale, attn_dt, ws.data(),
                                      ws_bytes, stream);
    Operand gq_in = in(dq, dqb), gk_in = in(dk, dkb);
    if (L.kind == Attention::rope && bf16()) {  // in place
      rope_backward_bf16_cuda(dqb.data(), dqb.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_backward_bf16_cuda(dkb.data(), dkb.data(), rope_cs.data(), B, T, H, Dh, stream);
    } else if (L.kind == Attention::rope) {
      rope_backward_cuda(dq_pre.data(), dq.data(), rope_cs.data(), B, T, H, Dh, stream);
      rope_backward_cuda(dk_pre.data(), dk.data(), rope_cs.data(), B, T, H, Dh, stream);
      gq_in = f32_operand(dq_pre.data()), gk_in = f32_operand(dk_pre.data());
    }
    const Operand h = in(L.h1, L.h1b);
    const Target dh_t = f32_target(dh.data());
    linear_backward_cuda(blas, dh_t, G(grads, p + "attn.wq"), gq_in, h, W(prm, p + "attn.wq"), N, D, HD, false);
    linear_backward_cuda(blas, dh_t, G(grads, p + "attn.wk"), gk_in, h, W(prm, p + "attn.wk"), N, D, HD, true);
    linear_backward_cuda(blas, dh_t, G(grads, p + "attn.wv"), in(dv, dvb), h, W(prm, p + "attn.wv"), N, D, HD, true);
    if (gate) {
      act_backward_cuda(Act::logsigmoid, dzf.data(), dlogf.data(), L.zf.data(), N * H, stream);
      linear_backward_cuda(blas, dh_t, G(grads, p + "attn.wf"), small_grad(dzf, H), h, W(prm, p + "attn.wf"), N, D, H,
                           true);
      bias_backward_cuda(G(grads, p + "attn.bf"), dzf.data(), N, H, stream, blas.reduce_scratch());
    }
    if (uses_path(L.kind)) {
      const bool bias = has(p + "attn.conv_bias");
      path_wpath_backward_cuda(du.data(), G(grads, p + "attn.conv"), bias ? G(grads, p + "attn.conv_bias") : nullptr,
                               dconv.data(), dw.data(), L.conv.data(), L.u.data(), P(prm, p + "attn.conv"), B, T, H, Dh,
                               static_cast<float>(nn::kPathWNormEps), stream, blas.reduce_scratch());
      linear_backward_cuda(blas, da1.data(), G(grads, p + "attn.w2"), nullptr, du.data(), L.a1.data(),
                           P(prm, p + "attn.w2"), N, R, HD, false);
      linear_backward_cuda(blas, dh_t, G(grads, p + "attn.w1"), small_grad(da1, R), h, W(prm, p + "attn.w1"), N, D, R,
                           true);
      path_beta_backward_cuda(dzb.data(), dbeta.data(), L.zb.data(), N * H, beta_max, stream);
      linear_backward_cuda(blas, dh_t, G(grads, p + "attn.wbeta"), small_grad(dzb, H), h, W(prm, p + "attn.wbeta"), N,
                           D, H, true);
      bias_backward_cuda(G(grads, p + "attn.bbeta"), dzb.data(), N, H, stream, blas.reduce_scratch());
    }
    norm_backward(prm, grads, dh.data(), L.x_in.data(), L.mean1, L.rstd1, p + "norm1", true);
  }

  void mlp_forward(const float* prm, Layer& L, const std::string& p, float* x_next) {
    norm_forward(prm, out(L.h2, L.h2b), L.mean2, L.rstd2, L.x_mid.data(), p + "norm2");
    const bool glu = c.mlp == MlpKind::swiglu;
    const std::string w_in = p + (glu ? "mlp.w_gate_up" : "mlp.w_in"), w_out = p + (glu ? "mlp.w_down" : "mlp.w_out");
    const int64_t f_in = glu ? 2 * F : F;
    linear(out(L.g, L.gb), in(L.h2, L.h2b), W(prm, w_in), nullptr, N, D, f_in);
    if (glu && bf16())
      swiglu_forward_bf16_cuda(L.sb.data(), L.gb.data(), N, F, stream);
    else if (glu)
      swiglu_forward_cuda(L.s.data(), L.g.data(), N, F, stream);
    else if (bf16())
      act_forward_bf16_cuda(Act::gelu, L.sb.data(), L.gb.data(), N * F, stream);
    else
      act_forward_cuda(Act::gelu, L.s.data(), L.g.data(), N * F, stream);
    linear_forward_residual_cuda(blas, x_next, in(L.s, L.sb), W(prm, w_out), L.x_mid.data(), N, F, D);
  }

  void mlp_backward(const float* prm, float* grads, Layer& L, const std::string& p) {  // dx: d(x_next) -> d(x_mid)
    const bool glu = c.mlp == MlpKind::swiglu;
    const std::string w_in = p + (glu ? "mlp.w_gate_up" : "mlp.w_in"), w_out = p + (glu ? "mlp.w_down" : "mlp.w_out");
    const int64_t f_in = glu ? 2 * F : F;
    linear_backward_cuda(blas, out(ds, dsb), G(grads, w_out), dres(), in(L.s, L.sb), W(prm, w_out), N, F, D, false);
    if (glu && bf16())
      swiglu_backward_bf16_cuda(dgb.data(), dsb.data(), L.gb.data(), N, F, stream);
    else if (glu)
      swiglu_backward_cuda(dg.data(), ds.data(), L.g.data(), N, F, stream);
    else if (bf16())
      act_backward_bf16_cuda(Act::gelu, dgb.data(), dsb.data(), L.gb.data(), N * F, stream);
    else
      act_backward_cuda(Act::gelu, dg.data(), ds.data(), L.g.data(), N * F, stream);
    linear_backward_cuda(blas, f32_target(dh.data()), G(grads, w_in), in(dg, dgb), in(L.h2, L.h2b), W(prm, w_in), N, D,
                         f_in, false);
    norm_backward(prm, grads, dh.data(), L.x_mid.data(), L.mean2, L.rstd2, p + "norm2", true);
  }

  const char* head_name() const { return c.tied_embeddings ? "embed.weight" : "head.weight"; }
  bool all_rows() const { return M == N; }
  int64_t batch_ints() const { return 3 * N + embedding_index_ints(N); }

  // Validates the batch on the host, stages it in pinned memory and uploads it (asynchronously).
  void upload_batch(const int32_t* in_ids, const int32_t* labels) {
    for (int64_t n = 0; n < N; ++n)
      if (in_ids[n] < 0 || in_ids[n] >= V) fail("gpu runner: token id {} at position {} is outside [0, {})", in_ids[n], n, V);
    host_rows.clear(), host_row_labels.clear();
    for (int64_t n = 0; n < N; ++n) {
      if (labels[n] == -100) continue;
      if (labels[n] < 0 || labels[n] >= V) fail("gpu runner: label {} at position {} is outside [0, {})", labels[n], n, V);
      host_rows.push_back(static_cast<int32_t>(n)), host_row_labels.push_back(labels[n]);
    }
    M = static_cast<int64_t>(host_rows.size());
    StagingSlot& slot = *staging[next_slot];
    next_slot ^= 1;
    // Waits only for the upload issued from this slot two batches ago (bounds the host's run-ahead).
    CUDA_CHECK(cudaEventSynchronize(slot.copied));
    std::memcpy(slot.host, in_ids, N * sizeof(int32_t));
    std::memcpy(slot.host + N, host_rows.data(), M * sizeof(int32_t));
    std::memcpy(slot.host + 2 * N, host_row_labels.data(), M * sizeof(int32_t));
    embedding_index_build(slot.host + 3 * N, in_ids, N, V, D, id_counts.data(), blas.reduce_scratch().floats);
    CUDA_CHECK(cudaMemcpyAsync(batch.data(), slot.host, batch_ints() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(slot.copied, stream));
  }

  // Embedding, layers and the final norm: fixed shapes, one CUDA graph.
  void forward_layers(const float* prm) {
    float* x0 = layers.empty() ? x_final.data() : layers[0].x_in.data();
    if (bf16()) f32_to_bf16_cuda(wb.data(), prm + wb_begin, wb.size(), stream);  // this step's layer weights
    embedding_forward_cuda(x0, ids, P(prm, "embed.weight"), N, V, D, stream);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      Layer& L = layers[l];
      const std::string p = Transformer<float>::layer_prefix(l);
      norm_forward(prm, out(L.h1, L.h1b), L.mean1, L.rstd1, L.x_in.data(), p + "norm1");
      attention_forward(prm, L, p);
      linear_forward_residual_cuda(blas, L.x_mid.data(), in(L.att, L.ob), W(prm, p + "attn.wo"), L.x_in.data(), N, HD, D);
      float* x_next = l + 1 < c.n_layers ? layers[l + 1].x_in.data() : x_final.data();
      if (c.mlp != MlpKind::none)
        mlp_forward(prm, L, p, x_next);
      else
        CUDA_CHECK(cudaMemcpyAsync(x_next, L.x_mid.data(), N * D * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    norm_forward(prm, f32_target(hf.data()), meanf, rstdf, x_final.data(), "norm_f");  // the head stays fp32
  }

  int64_t forward(const float* prm, const int32_t* in_ids, const int32_t* labels) {
    upload_batch(in_ids, labels);
    forward_graph.run(stream, {prm}, [&] { forward_layers(prm); });
    // The head only sees the M labelled rows (M varies per batch: eager launches).
    ensure_head_rows(std::max<int64_t>(1, M));
    const float* head_in = hf.data();
    if (!all_rows()) {
      gather_rows_cuda(hf_rows.data(), hf.data(), rows, M, D, stream);
      head_in = hf_rows.data();
    }
    linear_forward_cuda(blas, logits.data(), head_in, P(prm, head_name()), nullptr, M, D, V);
    crossentropy_forward_cuda(losses.data(), loss_sum.data(), logits.data(), row_labels, M, V, stream);
    have_forward = true;
    return M;
  }

  // From d(final norm output) in dh to the embedding gradient: fixed shapes, one CUDA graph.
  void backward_layers(const float* prm, float* grads) {
    norm_backward(prm, grads, dh.data(), x_final.data(), meanf, rstdf, "norm_f", false);
    for (int64_t l = c.n_layers - 1; l >= 0; --l) {
      Layer& L = layers[l];
      const std::string p = Transformer<float>::layer_prefix(l);
      if (c.mlp != MlpKind::none) mlp_backward(prm, grads, L, p);
      attention_backward(prm, grads, L, p);
    }
    embedding_backward_cuda(G(grads, "embed.weight"), dx.data(), embed_index, N, V, D, stream, blas.reduce_scratch());
  }

  void backward(const float* prm, float* grads, float scale_loss) {
    if (!trains) fail("gpu runner: built for evaluation only (train = false): it has no backward");
    if (!have_forward) fail("gpu runner: backward needs a forward first");
    crossentropy_backward_cuda(dlogits.data(), logits.data(), row_labels, M, V, scale_loss, stream);
    float* dhead = G(grads, head_name());
    if (all_rows()) {
      linear_backward_cuda(blas, dh.data(), dhead, nullptr, dlogits.data(), hf.data(), P(prm, head_name()), M, D, V,
                           false);
    } else {
      CUDA_CHECK(cudaMemsetAsync(dh.data(), 0, N * D * sizeof(float), stream));
      linear_backward_cuda(blas, dhf_rows.data(), dhead, nullptr, dlogits.data(), hf_rows.data(), P(prm, head_name()), M,
                           D, V, false);
      scatter_rows_cuda(dh.data(), dhf_rows.data(), rows, M, D, stream);
    }
    backward_graph.run(stream, {prm, grads}, [&] { backward_layers(prm, grads); });
  }
};

GpuRunner::GpuRunner(const Transformer<float>& model, int64_t B, int64_t T, MatmulPrecision precision,
                     cudaStream_t stream, bool cuda_graphs, bool train)
    : impl_(std::make_unique<Impl>(model, B, T, precision, stream, cuda_graphs, train)) {}
GpuRunner::~GpuRunner() = default;
int64_t GpuRunner::batch() const { return impl_->B; }
int64_t GpuRunner::seq_len() const { return impl_->T; }
int64_t GpuRunner::forward(const float* params, const int32_t* ids, const int32_t* labels) {
  return impl_->forward(params, ids, labels);
}
const double* GpuRunner::loss_sum_device() const { return impl_->loss_sum.data(); }
void GpuRunner::backward(const float* params, float* grads, float scale) { impl_->backward(params, grads, scale); }
const float* GpuRunner::logits_device() const { return impl_->logits.data(); }
const std::vector<int32_t>& GpuRunner::logit_rows() const { return impl_->host_rows; }

void GpuRunner::argmax(int32_t* predictions) {
  Impl& m = *impl_;
  std::vector<int32_t> best(static_cast<size_t>(m.M));
  DeviceArray<int32_t> d_best(std::max<int64_t>(1, m.M));
  argmax_rows_cuda(d_best.data(), m.logits.data(), m.M, m.V, m.stream);
  if (m.M > 0)
    CUDA_CHECK(cudaMemcpyAsync(best.data(), d_best.data(), m.M * sizeof(int32_t), cudaMemcpyDeviceToHost, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  std::fill(predictions, predictions + m.N, -1);
  for (int64_t r = 0; r < m.M; ++r) predictions[m.host_rows[r]] = best[r];
}

}  // namespace sb::cuda
