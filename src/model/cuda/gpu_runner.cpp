// gpu_runner.cpp: GpuRunner, the device forward/backward of the transformer (mirrors
// src/model/runner.cpp op for op; activation gradients are overwritten, parameter gradients
// accumulated). This file: buffers, batch upload, the head and the step's order; the layer stacks
// are model/cuda/gpu_runner_layers.cpp. bf16 precision stores the products' activations as bf16 (kernels/ops/ops_bf16.hpp),
// reading the weights from a bf16 mirror of the parameters made at each forward. With a StepProfiler
// attached (set_profiler), each op region is timed and the layer stacks launch eagerly.
#include "model/cuda/gpu_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/cuda/gpu_runner_impl.hpp"

namespace sb::cuda {

GpuRunner::Impl::Impl(const Transformer<float>& m, int64_t b, int64_t t, MatmulPrecision prec, cudaStream_t st,
                      bool graphs, bool train, PathRows path_rows)
    : model(m), c(m.config()), blas(prec, st), stream(st), trains(train), post(c.norm_position == NormPosition::post),
      B(b), T(t), N(b * t), D(c.d_model), H(c.n_heads), Dh(c.head_dim), HD(c.n_heads * c.head_dim), F(c.mlp_hidden()),
      V(m.vocab_size()), R(c.path.rank), attn_dt(prec == MatmulPrecision::bf16 ? DType::BF16 : DType::F32),
      forward_graphs(graphs), backward_graphs(graphs) {
  if (B < 1 || T < 1) fail("gpu runner: batch {} and length {} must be >= 1", B, T);
  if (c.position == PositionKind::learned && T > c.max_len)
    fail("model.max_len: sequences of {} tokens exceed the {} learned positions", T, c.max_len);
  scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  beta_max = static_cast<float>(c.path.beta_clamp > 0 ? c.path.beta_clamp : 2.0);
  dims.B = B, dims.T = T, dims.H = H, dims.Dh = Dh;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  rows_kernels = path_rows == PathRows::on;
  if (path_rows == PathRows::automatic)  // one CTA a head: at least half the SMs busy (model/path_rows.hpp)
    rows_kernels = 2 * B * H >= sms;
  const int64_t f_in = c.mlp == MlpKind::swiglu ? 2 * F : F;
  const bool bf = bf16();
  bool any_path = false, any_rope = false, any_gate = false, any_rope_ops = false;  // ops: rope.cu's kernels
  for (int64_t l = 0; l < c.n_layers; ++l) {
    Layer L;
    L.kind = c.layer_attention(l);
    L.x_in.resize(N * D), L.mean1.resize(N), L.rstd1.resize(N);
    L.rope_in_kernel = L.kind == Attention::rope && softmax_attention_takes_rope(dims);
    const bool rope_ops = L.kind == Attention::rope && !L.rope_in_kernel;
    if (bf && rope_ops) L.q.resize(N * HD), L.k.resize(N * HD);  // rotated, then rounded once
    const std::string prefix = Transformer<float>::layer_prefix(l);
    const auto offset = [&](const char* w) { return model.params().view(prefix + w).offset; };
    const bool strides = L.kind != Attention::sba && attention_takes_strides(uses_path(L.kind), dims, attn_dt);
    L.grads_in_pack = bf && strides;
    L.qkv_in_one = strides && !uses_path(L.kind) && offset("attn.wk") == offset("attn.wq") + HD * D &&
                   offset("attn.wv") == offset("attn.wk") + HD * D;
    const int64_t qkv = L.qkv_in_one ? 3 : 1;  // q's buffer holds k and v too
    if (bf) {
      L.h1b.resize(N * D), L.qb.resize(qkv * N * HD), L.ob.resize(N * HD);
      if (!L.qkv_in_one) L.kb.resize(N * HD), L.vb.resize(N * HD);
    } else {
      L.q.resize(qkv * N * HD), L.att.resize(N * HD);
      if (!L.qkv_in_one) L.k.resize(N * HD), L.v.resize(N * HD);
    }
    if (!bf && !post) L.h1.resize(N * D);  // post-norm fp32 reads x_in in place
    if (post) L.y1.resize(N * D);
    if (uses_gate(L.kind)) L.zf.resize(N * H), L.logf.resize(N * H), any_gate = true;
    if (uses_path(L.kind)) {
      L.u.resize(N * HD), L.w.resize(N * HD), L.w12.resize(HD * D);
      if (bf) L.w12b.resize(HD * D);
      L.zb.resize(N * H), L.beta.resize(N * H);
      L.factors.resize(static_cast<int64_t>(path_attention_factors_bytes(dims, attn_dt)));
      any_path = true;
    }
    any_rope |= L.kind == Attention::rope, any_rope_ops |= rope_ops;
    L.lse.resize(B * H * T), L.x_mid.resize(N * D);
    if (c.mlp != MlpKind::none) {
      L.mean2.resize(N), L.rstd2.resize(N);
      if (bf)
        L.h2b.resize(N * D), L.gb.resize(N * f_in), L.sb.resize(N * F);
      else
        L.g.resize(N * f_in), L.s.resize(N * F);
      if (!bf && !post) L.h2.resize(N * D);
      if (post) L.r2.resize(N * D);
    }
    const bool sba = L.kind == Attention::sba;
    const size_t fwd_ws = uses_path(L.kind) ? path_attention_forward_workspace_bytes(dims, attn_dt, true)
                          : sba             ? 0
                                            : softmax_attention_forward_workspace_bytes(dims, attn_dt);
    const size_t bwd_ws = !trains              ? 0
                          : uses_path(L.kind) ? path_attention_backward_workspace_bytes(dims, attn_dt, true)
                          : sba               ? sba_attention_backward_workspace_bytes(dims)
                                              : softmax_attention_backward_workspace_bytes(dims, attn_dt);
    ws_bytes = std::max({ws_bytes, fwd_ws, bwd_ws});
    layers.push_back(std::move(L));
  }
  ws.resize(static_cast<int64_t>(ws_bytes));
  if (any_rope) rope_cs.resize(T * Dh), rope_table_cuda(rope_cs.data(), T, Dh, c.rope_theta, stream);
  batch.resize(batch_ints());
  ids = batch.data(), rows = batch.data() + N, row_labels = batch.data() + 2 * N, row_starts = batch.data() + 3 * N;
  embed_index = row_starts + B + 1, row_of = embed_index + embedding_index_ints(N);
  id_counts.resize(V);
  for (auto& slot : staging) slot = std::make_unique<StagingSlot>(batch_ints());
  x_final.resize(N * D), hf.resize(N * D), meanf.resize(N), rstdf.resize(N);
  hf_rows.resize(N * D), losses.resize(N), loss_sum.resize(crossentropy_sum_doubles(N));  // M <= N rows
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
  side = std::make_unique<SideStream>();
  wblas = std::make_unique<Blas>(prec, side->stream());
  dx.resize(N * D), dh.resize(N * D);
  if (bf) {
    dxb.resize(N * D), dob.resize(N * HD), dqb.resize(N * HD), dkb.resize(N * HD), dvb.resize(N * HD);
    if (dh_in_bf16()) dhb.resize(N * D);
  } else {
    datt.resize(N * HD), dq.resize(N * HD), dk.resize(N * HD), dv.resize(N * HD);
    if (any_rope_ops) dq_pre.resize(N * HD), dk_pre.resize(N * HD);
  }
  if (any_path) {
    dw.resize(N * HD), du.resize(N * HD), dconv.resize(N * HD), dbeta.resize(N * H);
    dzb.resize(N * H);
  }
  if (any_gate) dlogf.resize(N * H), dzf.resize(N * H);
  for (Layer& L : layers) {  // KP: the widest layer's packed input projections
    InProj proj[kMaxPackParts];
    L.kp = packed_width(proj, in_projections(L, "", proj));
    KP = std::max(KP, L.kp);
  }
  if (bf) dprojb.resize(2 * N * KP), wcatb.resize(KP * D); else dprojf.resize(N * KP), wcatf.resize(KP * D);
  dwcat.resize(KP * D);
  if (c.mlp == MlpKind::swiglu && bf) {
    // dgb, dxb, gb, sb and h2b are whole allocations (256-byte aligned)
    swiglu_down_fits = swiglu_up_fits = true;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = Transformer<float>::layer_prefix(l);
      swiglu_down_fits &= swiglu_down_backward_fits(D, F, {W(nullptr, p + "mlp.w_down").data});
      swiglu_up_fits &= swiglu_up_forward_fits(D, F, {W(nullptr, p + "mlp.w_gate_up").data});
    }
  }
  if (c.mlp != MlpKind::none && bf) dgb.resize(N * f_in), dsb.resize(swiglu_down_fused(N) ? 0 : N * F);
  if (c.mlp != MlpKind::none && !bf) dg.resize(N * f_in), ds.resize(N * F);
  dhf_rows.resize(N * D);
}

// Grows logits / dlogits to hold M rows (by half again, capped at N). Tasks label a fraction of
// the positions (MQRAR: 32 of 768), so N x V buffers would waste most of a cell's memory. Waits
// for the stream first: the previous step may still read the old buffers.
void GpuRunner::Impl::ensure_head_rows(int64_t rows) {
  if (rows <= head_rows) return;
  head_rows = std::min(N, std::max(rows, head_rows + head_rows / 2));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  logits.resize(head_rows * V);
  if (trains) dlogits.resize(head_rows * V);
}

// Sizes the rows tail's buffers to head_rows (pruned batches only: dense tasks never allocate them).
void GpuRunner::Impl::ensure_tail_rows() {
  if (x_rows.size() >= head_rows * D) return;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  x_rows.resize(head_rows * D), lse_rows.resize(head_rows * H);
  if (bf16()) att_rowsb.resize(head_rows * HD); else att_rows.resize(head_rows * HD);
  if (!trains) return;
  dres_rows.resize(head_rows * D);
  if (bf16()) datt_rowsb.resize(head_rows * HD); else datt_rows.resize(head_rows * HD);
  if (swiglu_down_fits && dsb.size() < head_rows * F) dsb.resize(head_rows * F);  // Mt rows may run unfused
}

// Allocates the rows attention's workspace (the forward's checkpoints, read by the backward) on its
// first use.
void GpuRunner::Impl::ensure_rows_workspace() {
  if (rows_ws.size() > 0) return;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  rows_ws.resize(static_cast<int64_t>(path_attention_rows_workspace_bytes(dims)));
}

// Validates the batch on the host, stages it in pinned memory and uploads it (asynchronously).
void GpuRunner::Impl::upload_batch(const int32_t* in_ids, const int32_t* labels) {
  for (int64_t n = 0; n < N; ++n)
    if (in_ids[n] < 0 || in_ids[n] >= V) fail("gpu runner: token id {} at position {} is outside [0, {})", in_ids[n], n, V);
  host_rows.clear(), host_row_labels.clear();
  for (int64_t n = 0; n < N; ++n) {
    if (labels[n] == -100) continue;
    if (labels[n] < 0 || labels[n] >= V) fail("gpu runner: label {} at position {} is outside [0, {})", labels[n], n, V);
    host_rows.push_back(static_cast<int32_t>(n)), host_row_labels.push_back(labels[n]);
  }
  M = static_cast<int64_t>(host_rows.size());
  // Sequence b's rows are host_rows[row_start[b] .. row_start[b + 1]) (ascending, so one pass).
  host_row_starts.assign(B + 1, 0);
  for (int32_t r : host_rows) ++host_row_starts[r / T + 1];
  max_rows_per_seq = 0;
  for (int64_t b = 0; b < B; ++b)
    max_rows_per_seq = std::max<int64_t>(max_rows_per_seq, host_row_starts[b + 1]),
    host_row_starts[b + 1] += host_row_starts[b];
  Mt = pruned() ? std::min(N, tail_rows_for(M)) : M;
  StagingSlot& slot = *staging[next_slot];
  next_slot ^= 1;
  // Waits only for the upload issued from this slot two batches ago (bounds the host's run-ahead).
  CUDA_CHECK(cudaEventSynchronize(slot.uploaded));
  std::memcpy(slot.host, in_ids, N * sizeof(int32_t));
  std::memcpy(slot.host + N, host_rows.data(), M * sizeof(int32_t));
  std::fill(slot.host + N + M, slot.host + N + Mt, -1);
  std::memcpy(slot.host + 2 * N, host_row_labels.data(), M * sizeof(int32_t));
  std::fill(slot.host + 2 * N + M, slot.host + 2 * N + Mt, -1);
  std::memcpy(slot.host + 3 * N, host_row_starts.data(), (B + 1) * sizeof(int32_t));
  embedding_index_build(slot.host + 3 * N + B + 1, in_ids, N, V, D, id_counts.data(), blas.reduce_scratch().floats);
  int32_t* host_row_of = slot.host + 3 * N + B + 1 + embedding_index_ints(N);
  std::fill(host_row_of, host_row_of + N, -1);
  for (int64_t m = 0; m < M; ++m) host_row_of[host_rows[m]] = static_cast<int32_t>(m);
  // The copy over PCIe runs on the upload stream beside the previous step's work (once this slot's
  // last batch has left slot.dev); the step itself only moves it on the device into `batch`, which
  // every graph reads.
  const size_t bytes = static_cast<size_t>(batch_ints()) * sizeof(int32_t);
  CUDA_CHECK(cudaStreamWaitEvent(upload.s, slot.consumed, 0));
  CUDA_CHECK(cudaMemcpyAsync(slot.dev.data(), slot.host, bytes, cudaMemcpyHostToDevice, upload.s));
  CUDA_CHECK(cudaEventRecord(slot.uploaded, upload.s));
  CUDA_CHECK(cudaStreamWaitEvent(stream, slot.uploaded, 0));
  CUDA_CHECK(cudaMemcpyAsync(batch.data(), slot.dev.data(), bytes, cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaEventRecord(slot.consumed, stream));
}

// A sparse-label batch (pruned()) ends the last layer on its labelled rows (the rows tail, over Mt
// rows); otherwise the whole stack runs. The head and the loss run in the same graph over Mt rows
// (padding rows: label -1, loss 0), except for a batch between the two (more than half of its rows
// labelled, not all), whose head gathers its M rows after the graph.
int64_t GpuRunner::Impl::forward(const float* prm, const int32_t* in_ids, const int32_t* labels) {
  {
    ProfileScope op(prof, "fwd.upload");
    upload_batch(in_ids, labels);
  }
  ensure_head_rows(std::max<int64_t>(1, Mt));
  if (pruned()) ensure_tail_rows();
  if (trains && rows_attention()) ensure_rows_workspace();
  const auto head = [&] {
    {
      ProfileScope op(prof, "fwd.head");
      const float* in = pruned() ? hf_rows.data() : hf.data();
      if (!head_in_graph()) {
        gather_rows_cuda(hf_rows.data(), hf.data(), D, nullptr, nullptr, 0, false, rows, M, stream);
        in = hf_rows.data();
      }
      linear_forward_cuda(blas, logits.data(), in, P(prm, head_name()), nullptr, Mt, D, V);
    }
    ProfileScope op(prof, "fwd.loss");
    crossentropy_forward_cuda(losses.data(), loss_sum.data(), logits.data(), row_labels, Mt, V, stream);
  };
  const auto body = [&] {
    forward_layers(prm);
    if (pruned()) {
      ProfileScope op(prof, "fwd.rows_tail");
      forward_rows_tail(prm);  // writes hf_rows
    }
    if (head_in_graph()) head();
  };
  // head_rows in the key: the head's and the tail's buffers move when they grow.
  if (prof)
    body();
  else
    forward_graphs.of(pruned() ? Mt : 0).run(stream, {prm, graph_mode(), as_key(head_rows)}, body);
  if (!head_in_graph()) head();
  have_forward = true;
  return M;
}

void GpuRunner::Impl::backward(const float* prm, float* grads, float scale_loss) {
  if (!trains) fail("gpu runner: built for evaluation only (train = false): it has no backward");
  if (!have_forward) fail("gpu runner: backward needs a forward first");
  {
    ProfileScope op(prof, "bwd.loss");  // eagerly: scale_loss changes from step to step
    crossentropy_backward_cuda(dlogits.data(), logits.data(), row_labels, Mt, V, scale_loss, stream);
  }
  const auto head = [&] {
    ProfileScope op(prof, "bwd.head");
    float* dhead = G(grads, head_name());
    if (head_in_graph()) {  // dh: the Mt tail rows' d(final norm output) (zero on the padding rows), or every row's
      linear_backward_cuda(blas, dh.data(), dhead, nullptr, dlogits.data(), pruned() ? hf_rows.data() : hf.data(),
                           P(prm, head_name()), Mt, D, V, false);
    } else {
      linear_backward_cuda(blas, dhf_rows.data(), dhead, nullptr, dlogits.data(), hf_rows.data(), P(prm, head_name()),
                           M, D, V, false);
      expand_rows_cuda(dh.data(), dhf_rows.data(), D, nullptr, nullptr, 0, false, row_of, N, stream);
    }
  };
  if (!head_in_graph()) head();
  const auto body = [&] {
    if (head_in_graph()) head();
    if (pruned()) {
      ProfileScope op(prof, "bwd.rows_tail");
      backward_rows_tail(prm, grads);
    }
    backward_layers(prm, grads);
  };
  if (prof)
    body();
  else
    backward_graphs.of(pruned() ? Mt : 0).run(stream, {prm, grads, graph_mode(), as_key(head_rows)}, body);
}

GpuRunner::GpuRunner(const Transformer<float>& model, int64_t B, int64_t T, MatmulPrecision precision,
                     cudaStream_t stream, bool cuda_graphs, bool train, PathRows path_rows)
    : impl_(std::make_unique<Impl>(model, B, T, precision, stream, cuda_graphs, train, path_rows)) {}
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
void GpuRunner::set_profiler(StepProfiler* profiler) { impl_->prof = profiler; }

void GpuRunner::argmax(int32_t* predictions) {
  Impl& m = *impl_;
  std::vector<int32_t> best(static_cast<size_t>(m.M));
  DeviceBuffer<int32_t> d_best(std::max<int64_t>(1, m.M));
  argmax_rows_cuda(d_best.data(), m.logits.data(), m.M, m.V, m.stream);
  if (m.M > 0)
    CUDA_CHECK(cudaMemcpyAsync(best.data(), d_best.data(), m.M * sizeof(int32_t), cudaMemcpyDeviceToHost, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  std::fill(predictions, predictions + m.N, -1);
  for (int64_t r = 0; r < m.M; ++r) predictions[m.host_rows[r]] = best[r];
}

}  // namespace sb::cuda
