// gpu_runner_impl.hpp: GpuRunner's implementation state (internal to gpu_runner*.cpp):
// the activation, gradient and batch buffers of one (B, T), the operand helpers that pick fp32 or
// bf16 storage, and the method split: model/cuda/gpu_runner.cpp owns construction, batch upload and the head;
// model/cuda/gpu_runner_layers.cpp the layer stacks and the rows tail of sparse-label batches.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "model/cuda/blas.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "model/cuda/side_stream.hpp"
#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/pack.hpp"
#include "model/cuda/step_profiler.hpp"
#include "model/cuda/stream_graph.hpp"

namespace sb::cuda {

namespace runner_detail {
using Buf = DeviceBuffer<float>;
using Bf16Buf = DeviceBuffer<uint16_t>;

// One slot of the batch uploads ([ids N | rows N | row labels N | row starts B + 1 | embedding index]
// int32): pinned host memory, its device copy (made on the upload stream, beside the previous step's
// work) and the events that order them: `uploaded` (host -> dev done: the host may refill `host`),
// `consumed` (dev moved into the runner's batch buffer on its stream: dev may be overwritten).
struct StagingSlot {
  int32_t* host = nullptr;
  DeviceBuffer<int32_t> dev;
  cudaEvent_t uploaded = nullptr, consumed = nullptr;
  explicit StagingSlot(int64_t ints) : dev(ints) {
    CUDA_CHECK(cudaMallocHost(&host, static_cast<size_t>(ints) * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&consumed, cudaEventDisableTiming));
  }
  ~StagingSlot() {
    if (consumed) cudaEventDestroy(consumed);
    if (uploaded) cudaEventDestroy(uploaded);
    if (host) cudaFreeHost(host);
  }
  StagingSlot(const StagingSlot&) = delete;
  StagingSlot& operator=(const StagingSlot&) = delete;
};

// A non-blocking stream of the runner's own (the batch uploads), destroyed with it.
struct OwnedStream {
  cudaStream_t s = nullptr;
  OwnedStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~OwnedStream() {
    if (s) cudaStreamDestroy(s);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
};
}  // namespace runner_detail

using namespace runner_detail;

struct GpuRunner::Impl {
  struct Layer {
    Attention kind;
    // fp32 precisions use the Buf of an activation, bf16 precision its Bf16Buf (never both).
    Buf x_in, h1, mean1, rstd1, q, k, v, zf, logf, u, w, zb, beta, att, lse, x_mid, h2, mean2, rstd2, g, s;
    Buf w12;       // PaTH: [HD, D] = w2 w1, the low-rank pair folded (u = h w12^T is one product), each forward
    Bf16Buf w12b;  // its bf16 copy in bf16 precision
    Buf y1, r2;  // post-norm: [N, D] norm1's output, norm2's input (norm1's input is x_mid)
    Bf16Buf h1b, h2b, qb, kb, vb, ob, gb, sb;  // [N, D] h1b h2b, [N, HD] qb kb vb ob, [N, f_in] gb, [N, F] sb
    DeviceBuffer<char> factors;  // PaTH: the forward's factors, reused by the backward
    // bf16 training: the attention backward stores dq, dk, dv straight into the packed operand's
    // columns (attention_takes_strides), so that packing copies only the small gradients.
    bool grads_in_pack = false;
    int64_t kp = 0;  // training: the packed width of its input projections (packed_width)
    // Softmax kinds: q, k, v as one product into one [N, 3 HD] matrix (q.data() / qb.data(), 3 N HD
    // long) that the attention kernels read with a row stride (attention_takes_strides; wq, wk, wv
    // adjacent). Not PaTH: its w and beta inputs on the side stream take longer than q, k, v, and the
    // one wider product slowed its step by 1% (kernels/DESIGN.md).
    bool qkv_in_one = false;
    // RoPE inside the softmax kernels (softmax_attention_takes_rope): q, k and their gradients un-rotated.
    bool rope_in_kernel = false;
  };

  const Transformer<float>& model;
  const ModelConfig& c;
  Blas blas;
  cudaStream_t stream;
  bool trains;  // false: an evaluation runner (forward only, no gradient buffers)
  bool post;    // post-norm blocks: x = norm(x + f(x)), f reads x itself; no final norm
  int64_t B, T, N, D, H, Dh, HD, F, V, R, M = 0;
  float scale, beta_max;
  AttnDims dims;
  std::vector<Layer> layers;
  DType attn_dt;                // F32 (fp32 / tf32 precision) or BF16 (bf16 precision)
  // [3N + B + 1 + embedding_index_ints(N) + N]: ids | rows | row labels (first M used) | row starts |
  // embedding index | row_of (row_of[rows[m]] = m, else -1)
  DeviceBuffer<int32_t> batch;
  int32_t *ids = nullptr, *rows = nullptr, *row_labels = nullptr, *embed_index = nullptr, *row_of = nullptr;
  std::vector<int32_t> id_counts;  // [V] host scratch of embedding_index_build
  std::vector<int32_t> host_rows, host_row_labels, host_row_starts;  // host copies of rows, row labels, row starts
  std::unique_ptr<StagingSlot> staging[2];  // alternating: the host fills one while the other's copy may be pending
  OwnedStream upload;                        // the host -> device copies of the batches
  int next_slot = 0;
  // The layer stacks, the head and the loss forward and, for sparse-label batches, the rows tail
  // (its Mt rows: one graph each); the loss backward runs eagerly (its scale changes per step).
  StreamGraphs forward_graphs, backward_graphs;
  Buf x_final, hf, meanf, rstdf, hf_rows, losses;
  Buf rope_cs;  // [T, Dh/2, 2] RoPE (cos, sin), filled once (rope_table_cuda)
  Buf logits, dlogits;  // [head_rows, V]: sized to the most labelled rows seen (grown on demand, not N x V)
  int64_t head_rows = 0;
  DeviceBuffer<double> loss_sum;
  // Sparse-label batches (0 < M <= N / 2): the last layer after its attention inputs runs on the M
  // labelled rows only (model/cuda/gpu_runner_layers.cpp, "rows tail"); with PaTH there, its attention too
  // (path_attention_rows_*) where rows_attention() allows it.
  int32_t* row_starts = nullptr;  // view of batch: [B + 1] first index into rows of each sequence
  bool rows_kernels = false;      // the PathRows choice for this runner's (B, H) on this device
  int64_t max_rows_per_seq = 0;
  // The rows the tail and the head compute: M rounded up by tail_rows_for (rows[M .. Mt) and their
  // labels -1: padding rows, gathered as zeros, absent from row_of, loss and gradient zero), so that
  // batches whose M differs a little run the same shapes and replay one graph. M where there is no
  // tail.
  int64_t Mt = 0;
  // M rounded up to a multiple of 64, or of an eighth of the power of two at or below M (at most
  // 12.5% more rows from M = 512 on); the caller caps it at N.
  static int64_t tail_rows_for(int64_t m) {
    int64_t g = 64;
    while (g * 16 <= m) g *= 2;
    return (m + g - 1) / g * g;
  }
  Buf x_rows, dres_rows, att_rows, datt_rows, lse_rows;  // [head_rows, D] x 2, [head_rows, HD] x 2, [head_rows, H]
  Bf16Buf att_rowsb, datt_rowsb;                          // bf16 precision: [head_rows, HD]
  DeviceBuffer<char> rows_ws;  // training: the rows attention's checkpoints (path_attention_rows_workspace_bytes)
  DeviceBuffer<char> ws;  // attention workspace (max over calls)
  size_t ws_bytes = 0;
  bool have_forward = false;
  StepProfiler* prof = nullptr;  // set: op regions are timed and the layer stacks launch eagerly
  // Training runners run independent work on a side stream with its own cuBLAS handle: the weight-
  // gradient products (overlapping the activation-gradient chain; each marked done under the slot
  // of the shared gradient buffer it reads, which the main stream joins before writing that buffer
  // again) and the gate's and PaTH's attention inputs (beside q, k, v; joined before the attention).
  // Slots: readers of dx / dxb, of dg / dgb, of dproj; the attention's side inputs.
  enum SideSlot { kResidualReaders = 0, kMlpGrad = 1, kProjGrad = 2, kAttnInputs = 3 };
  std::unique_ptr<SideStream> side;
  std::unique_ptr<Blas> wblas;
  Buf dx, dh, datt, dq, dk, dv, dq_pre, dk_pre, dw, du, dconv, dlogf, dzf, dbeta, dzb, dg, ds, dhf_rows;
  // bf16 precision: [N, D] dxb (bf16 copy of dx), [N, HD] dob dqb dkb dvb, [N, f_in] dgb, [N, F] dsb,
  // and with pre-norm blocks [N, D] dhb: d(h) as the input projections' and the MLP input's products
  // write it (bf16, as their other outputs), read by the block's norm backward (dh_grad()).
  Bf16Buf dxb, dob, dqb, dkb, dvb, dgb, dsb, dhb;
  // The attention's input projections packed (attention_inputs_backward): [N, KP] their gradients
  // (dprojb in bf16 precision, two of them alternating by layer, else dprojf), [KP, D] their weights
  // (wcatb / wcatf), [KP, D] fp32 the weights' gradient; KP = the widest layer's packed_width.
  Buf dprojf, wcatf, dwcat;
  Bf16Buf dprojb, wcatb;
  int64_t KP = 0;
  struct InProj {
    std::string weight;   // parameter name, [grad.cols, D]; with folded, PaTH's w1 (w2 beside it)
    PackPart grad;        // d(its output) [N, grad.cols]
    bool folded = false;  // the layer's w12 = w2 w1 ([HD, D], not a parameter): its gradient goes to both
  };
  // bf16 precision: bf16 copy of the parameters [wb_begin, wb_begin + wb.size()), the span of the
  // layers' views (what the products read; embedding and head stay fp32), made by each forward.
  Bf16Buf wb;
  int64_t wb_begin = 0;
  // bf16 SwiGLU: the MLP's down-projection d(input) and the SwiGLU backward in one kernel
  // (swiglu_down_backward_bf16_cuda; no ds / dsb) where its shapes and every w_down mirror allow it
  // (swiglu_down_fits) and, over n rows, where it pays on this device's SMs (sms).
  bool swiglu_down_fits = false;
  int sms = 1;
  bool swiglu_down_fused(int64_t n) const { return swiglu_down_fits && swiglu_down_backward_pays(n, D, F, sms); }
  // bf16 SwiGLU: the MLP's input product and the SwiGLU in one kernel (swiglu_up_forward_bf16_cuda)
  // where the shapes and every w_gate_up mirror allow it and, over n rows, where it pays (both fits
  // stay false unless the MLP is SwiGLU in bf16).
  bool swiglu_up_fits = false;
  bool swiglu_up_fused(int64_t n) const { return swiglu_up_fits && swiglu_up_forward_pays(n, D, F, sms); }

  Impl(const Transformer<float>& m, int64_t b, int64_t t, MatmulPrecision prec, cudaStream_t st, bool graphs,
       bool train, PathRows path_rows);
  void ensure_head_rows(int64_t rows);
  void ensure_tail_rows();
  void ensure_rows_workspace();

  bool bf16() const { return attn_dt == DType::BF16; }
  // An activation as a product's operand / output, or an attention kernel's pointer: its bf16 buffer
  // in bf16 precision, else its fp32 one.
  Operand in(const Buf& f32, const Bf16Buf& b16) const {
    return bf16() ? bf16_operand(b16.data()) : f32_operand(f32.data());
  }
  Operand w12(const Layer& L) const { return in(L.w12, L.w12b); }
  Target out(Buf& f32, Bf16Buf& b16) const { return bf16() ? bf16_target(b16.data()) : f32_target(f32.data()); }
  void* kernel_view(const Buf& f32, const Bf16Buf& b16) const {
    return bf16() ? static_cast<void*>(b16.data()) : static_cast<void*>(f32.data());
  }
  // The attention's and the MLP's input h: the pre-norm's output, or with post-norm the residual
  // stream itself (x_in, y1), read in place in fp32 and through its bf16 copy (h1b, h2b) in bf16.
  Operand attn_in(const Layer& L) const { return post && !bf16() ? f32_operand(L.x_in.data()) : in(L.h1, L.h1b); }
  Operand mlp_in(const Layer& L) const { return post && !bf16() ? f32_operand(L.y1.data()) : in(L.h2, L.h2b); }

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
  // d(h) of a block's input norm (pre-norm): bf16 dhb in bf16 precision, else fp32 dh (post-norm adds
  // it to dx as it is). The final norm's d(h) comes from the fp32 head: dh.
  bool dh_in_bf16() const { return bf16() && !post; }
  Target dh_target() { return dh_in_bf16() ? bf16_target(dhb.data()) : f32_target(dh.data()); }
  Operand dh_grad() const { return dh_in_bf16() ? bf16_operand(dhb.data()) : f32_operand(dh.data()); }
  // The packed operand's width: the projections' rows rounded up to a multiple of 8 (16-byte rows of
  // bf16 for the tensor-core products).
  static int64_t packed_width(const InProj* proj, int n) {
    int64_t K = 0;
    for (int i = 0; i < n; ++i) K += proj[i].grad.cols;
    return (K + 7) / 8 * 8;
  }

  // Runs fn(blas) as side work under `slot`: fn launches on blas.stream() (inline on the main
  // stream while profiling, so the regions keep their work, and in evaluation runners).
  template <class Fn>
  void overlap(SideSlot slot, Fn&& fn) {
    if (prof || !side) return fn(blas);
    side->fork(stream);
    fn(*wblas);
    side->done(slot);
  }
  void join(SideSlot slot) {
    if (side) side->join(stream, slot);
  }
  void join_all() {
    if (side) side->join_all(stream);
  }

  void linear(Target y, Operand x, Operand w, const float* b, int64_t n, int64_t i, int64_t o) {
    linear_forward_cuda(blas, y, x, w, b, n, i, o);
  }

  // model/cuda/gpu_runner_layers.cpp: the layer ops over the first n rows of their buffers (n = N, or Mt in the rows tail).
  void norm_forward(const float* prm, Target y, Buf& mean, Buf& rstd, const float* x, const std::string& name,
                    int64_t n);
  void norm_backward(const float* prm, float* grads, Operand dout, const float* x, const Buf& mean, const Buf& rstd,
                     const std::string& name, bool accumulate, int64_t n);
  // Post-norm: dx holds d(norm output) of the norm over x; leaves d(x) in dx (and dxb), via dh.
  void post_norm_backward(const float* prm, float* grads, const float* x, const Buf& mean, const Buf& rstd,
                          const std::string& name, int64_t n);
  // dx (and dxb) = dh over the first n rows: the gradient of an output that is no norm's output.
  void dres_from_dh(int64_t n);
  // dx += d(block input) given dh = d(h): the norm's backward (pre-norm), or dx += dh (post-norm: h = x).
  void input_norm_backward(const float* prm, float* grads, const float* x, const Buf& mean, const Buf& rstd,
                           const std::string& name, int64_t n);
  void attention_inputs(const float* prm, Layer& L, const std::string& p);
  void attention_kernel_forward(Layer& L);
  void attention_kernel_backward(Layer& L);
  int in_projections(const Layer& L, const std::string& p, InProj* out) const;  // returns how many (<= 6)
  // This step's use of L.grads_in_pack: not where the rows tail's PaTH rows kernels write dq, dk, dv.
  bool packs_in_place(const Layer& L) const {
    return L.grads_in_pack && !(rows_attention() && &L == &layers.back());
  }
  // q (i = 0), k (1) or v (2) of L as the products write them and the attention kernels read them.
  void* qkv_view(const Layer& L, int i) const {
    if (!L.qkv_in_one)
      return i == 0 ? kernel_view(L.q, L.qb) : i == 1 ? kernel_view(L.k, L.kb) : kernel_view(L.v, L.vb);
    return bf16() ? static_cast<void*>(L.qb.data() + i * HD) : static_cast<void*>(L.q.data() + i * HD);
  }
  // The attention kernels' dims for L: q, k and v rows 3 HD apart where one buffer holds the three.
  AttnDims attn_dims(const Layer& L) const {
    AttnDims d = dims;
    if (L.qkv_in_one) d.qkv_ld = 3 * HD;
    return d;
  }
  // L's packed gradient operand: dprojb's half of L's index parity in bf16 precision, else dprojf.
  void* dproj_of(const Layer& L) const {
    if (!bf16()) return dprojf.data();
    return dprojb.data() + ((&L - layers.data()) % 2) * N * KP;
  }
  void attention_inputs_backward(const float* prm, float* grads, Layer& L, const std::string& p);
  void mlp_forward(const float* prm, Layer& L, const std::string& p, float* x_next, int64_t n);
  void mlp_backward(const float* prm, float* grads, Layer& L, const std::string& p, int64_t n);
  void forward_layers(const float* prm);
  void backward_layers(const float* prm, float* grads);
  void forward_rows_tail(const float* prm);
  void backward_rows_tail(const float* prm, float* grads);

  const char* head_name() const { return c.tied_embeddings ? "embed.weight" : "head.weight"; }
  bool all_rows() const { return M == N; }
  // The last batch's mode, from M and its rows per sequence: a rows tail where at most half the rows
  // are labelled (denser batches would pay its gathers for little saved work), with PaTH's rows
  // attention where the runner takes it (rows_kernels) and no sequence has more than kPathRowsMaxPerSeq.
  bool pruned() const { return M > 0 && 2 * M <= N && !layers.empty(); }
  bool rows_attention() const {
    return rows_kernels && pruned() && uses_path(layers.back().kind) && max_rows_per_seq <= kPathRowsMaxPerSeq;
  }
  // A number as a part of a StreamGraph key.
  static const void* as_key(int64_t v) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(v)); }
  // Whether the head and the loss run in the graphs: over every row, or over the rows tail's Mt.
  bool head_in_graph() const { return pruned() || all_rows(); }
  // The CUDA graphs' key part for that mode (the recorded work differs between the four).
  const void* graph_mode() const { return as_key(pruned() + rows_attention() + 4 * all_rows()); }
  int64_t batch_ints() const { return 4 * N + (B + 1) + embedding_index_ints(N); }
  void upload_batch(const int32_t* in_ids, const int32_t* labels);
  int64_t forward(const float* prm, const int32_t* in_ids, const int32_t* labels);
  void backward(const float* prm, float* grads, float scale_loss);
};

}  // namespace sb::cuda
