// cuDNN fused attention; see cudnn_attention.hpp. Tensor uids of the graphs:
//   1 Q, 2 K, 3 V (strided views of qkv), 4 O, 5 Stats (= lse), 6 dO, 7 dQ, 8 dK, 9 dV (ring
//   blocks: the same uids on the block's views and compact buffers);
//   packed samples (ragged graphs) add 10/11 the sample lengths (q, kv: the same buffer) and
//   12/13/14 the ragged offsets of qkv (Q, K, V, dQ, dK, dV), out (O, dO) and lse (Stats).
#ifdef RECIPE_WITH_CUDNN

#include "kernels/cuda/cudnn_attention.hpp"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"

namespace fe = cudnn_frontend;

namespace recipe::kernels::cuda {

struct CudnnAttention::Entry {
  std::shared_ptr<fe::graph::Graph> graph;
  std::vector<int64_t> plan_workspace;  // bytes, per built plan (heuristic order)
  int64_t plan = 0;                     // the plan that runs
  bool timed = false;                   // plan chosen by timing (or nothing left to time)
  bool ok = false;
  std::string why;
};

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV, kSeqQ, kSeqKV, kQkvOff, kOutOff, kLseOff };

cudnnHandle_t as_handle(void* h) { return static_cast<cudnnHandle_t>(h); }

}  // namespace

CudnnAttention::CudnnAttention(cudaStream_t stream, bool deterministic, bool tune_plans)
    : stream_(stream), deterministic_(deterministic), tune_plans_(tune_plans && !deterministic) {
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = cudnnCreate(&h);
  if (st != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("CUDA backend: cudnnCreate failed: ") + cudnnGetErrorString(st));
  st = cudnnSetStream(h, stream_);
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(h);
    throw std::runtime_error(std::string("CUDA backend: cudnnSetStream failed: ") + cudnnGetErrorString(st));
  }
  handle_ = h;
}

CudnnAttention::~CudnnAttention() {
  cache_.clear();
  if (handle_) cudnnDestroy(as_handle(handle_));
}

CudnnAttention::Entry& CudnnAttention::entry(const Key& key) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto e = std::make_unique<Entry>();
  // Plain copies, not a structured binding: the lambdas below capture them.
  const int B = std::get<0>(key), T = std::get<1>(key), Hq = std::get<2>(key), Hkv = std::get<3>(key),
            D = std::get<4>(key);
  const bool backward = std::get<5>(key);
  const int slots = std::get<6>(key);
  const int64_t Sq = std::get<7>(key), Skv = std::get<8>(key);
  const Mask mask = std::get<9>(key);
  const bool block = mask != Mask::sequence;
  // Packed samples: one graph batch entry per sample slot (B rows × slots), each a ragged view
  // starting at its offset; the slot lengths mask the rest (padding mask), and causal masking is
  // within each sample.
  const bool ragged = slots > 0;
  const int64_t S = ragged ? int64_t(B) * slots : B;
  const int64_t C3 = int64_t(Hq + 2 * Hkv) * D;
  // [batch, head, row, d] strides of a row-major [batch, rows, ..., D] buffer whose rows are
  // `row` elements apart.
  auto bhsd = [D](int64_t batch, int64_t row) { return std::vector<int64_t>{batch, D, row, 1}; };
  const std::vector<int64_t> qkv_stride = bhsd(int64_t(T) * C3, C3);
  const std::vector<int64_t> o_stride = bhsd(int64_t(T) * Hq * D, int64_t(Hq) * D);
  // A block's own results are compact (cudnn_attention.hpp): O and dQ [B, q_len, Hq·D], dK|dV
  // [B, k_len, 2·Hkv·D].
  const std::vector<int64_t> blk_q_stride = bhsd(Sq * Hq * D, int64_t(Hq) * D);
  const std::vector<int64_t> blk_kv_stride = bhsd(Skv * 2 * Hkv * D, int64_t(2) * Hkv * D);
  const float scale = 1.f / std::sqrt(float(D));

  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto index = [&](const char* name, int64_t uid, int64_t n) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({n, 1, 1, 1})
                         .set_stride({1, 1, 1, 1})
                         .set_data_type(fe::DataType_t::INT32));
  };
  std::shared_ptr<fe::graph::Tensor_attributes> seq_q, seq_kv, qkv_off, out_off, lse_off;
  if (ragged) {
    seq_q = index("seq_len_q", kSeqQ, S);
    seq_kv = index("seq_len_kv", kSeqKV, S);
    qkv_off = index("qkv_ragged_offset", kQkvOff, S + 1);
    out_off = index("out_ragged_offset", kOutOff, S + 1);
    lse_off = index("lse_ragged_offset", kLseOff, S + 1);
  }
  auto tensor = [&](const char* name, int64_t uid, int64_t heads, int64_t rows, const std::vector<int64_t>& stride) {
    auto t = g->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({S, heads, rows, D}).set_stride(stride));
    if (ragged) t->set_ragged_offset(uid == kO || uid == kdO ? out_off : qkv_off);
    return t;
  };
  // Stats: lse [B, Hq, T] (a block's compact [B, Hq, q_len]); ragged graphs keep it token-major
  // [B·T, Hq] (cudnn_attention.hpp).
  const std::vector<int64_t> stats_dim{S, Hq, Sq, 1};
  const std::vector<int64_t> stats_stride =
      ragged ? std::vector<int64_t>{int64_t(Hq) * T, 1, Hq, 1} : std::vector<int64_t>{int64_t(Hq) * Sq, Sq, 1, 1};
  auto Q = tensor("Q", kQ, Hq, Sq, qkv_stride);
  auto K = tensor("K", kK, Hkv, Skv, qkv_stride);
  auto V = tensor("V", kV, Hkv, Skv, qkv_stride);
  const bool causal = mask != Mask::block_full;
  if (!backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa_fwd")
                    .set_generate_stats(true)
                    .set_attn_scale(scale)
                    .set_causal_mask(causal);
    if (ragged) opts.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    auto [O, Stats] = g->sdpa(Q, K, V, opts);
    O->set_output(true).set_uid(kO).set_dim({S, Hq, Sq, D}).set_stride(block ? blk_q_stride : o_stride);
    Stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dim)
        .set_stride(stats_stride);
    if (ragged) {
      O->set_ragged_offset(out_off);
      Stats->set_ragged_offset(lse_off);
    }
  } else {
    auto O = tensor("O", kO, Hq, Sq, o_stride);
    auto dO = tensor("dO", kdO, Hq, Sq, o_stride);
    auto Stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim(stats_dim)
                               .set_stride(stats_stride)
                               .set_data_type(fe::DataType_t::FLOAT));
    if (ragged) Stats->set_ragged_offset(lse_off);
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_bwd")
                    .set_attn_scale(scale)
                    .set_causal_mask(causal)
                    .set_deterministic_algorithm(deterministic_);
    if (ragged)
      opts.set_padding_mask(true)
          .set_seq_len_q(seq_q)
          .set_seq_len_kv(seq_kv)
          .set_max_total_seq_len_q(int64_t(B) * T)
          .set_max_total_seq_len_kv(int64_t(B) * T);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
    dQ->set_output(true).set_uid(kdQ).set_dim({S, Hq, Sq, D}).set_stride(block ? blk_q_stride : qkv_stride);
    dK->set_output(true).set_uid(kdK).set_dim({S, Hkv, Skv, D}).set_stride(block ? blk_kv_stride : qkv_stride);
    dV->set_output(true).set_uid(kdV).set_dim({S, Hkv, Skv, D}).set_stride(block ? blk_kv_stride : qkv_stride);
    if (ragged) {
      dQ->set_ragged_offset(qkv_off);
      dK->set_ragged_offset(qkv_off);
      dV->set_ragged_offset(qkv_off);
    }
  }

  auto step = [&](fe::error_t st, const char* what) {
    if (st.is_good()) return true;
    e->why = std::string(what) + ": " + st.get_message();
    return false;
  };
  cudnnHandle_t h = as_handle(handle_);
  bool ok = step(g->validate(), "validate") && step(g->build_operation_graph(h), "build_operation_graph") &&
            step(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") &&
            step(g->check_support(h), "check_support") &&
            step(g->build_plans(h, tune_plans_ ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
                 "build_plans");
  // With ALL, a plan that failed to build keeps its index but cannot run: workspace -1.
  if (ok) {
    for (int64_t i = 0; i < g->get_execution_plan_count(); ++i) {
      int64_t ws = 0;
      if (!g->get_workspace_size_plan_at_index(i, ws).is_good()) ws = -1;
      e->plan_workspace.push_back(ws);
    }
    auto first = std::find_if(e->plan_workspace.begin(), e->plan_workspace.end(), [](int64_t w) { return w >= 0; });
    ok = first != e->plan_workspace.end();
    if (!ok) e->why = "build_plans: no plan could be built";
    e->plan = first - e->plan_workspace.begin();
    e->timed = std::count_if(e->plan_workspace.begin(), e->plan_workspace.end(), [](int64_t w) { return w >= 0; }) < 2;
  }
  e->ok = ok;
  e->graph = std::move(g);
  return *cache_.emplace(key, std::move(e)).first->second;
}

int64_t CudnnAttention::workspace_needed(int B, int T, int Hq, int Hkv, int D, bool backward, int slots) {
  Entry& e = entry(sequence_key(B, T, Hq, Hkv, D, backward, slots));
  if (!e.ok) {
    last_rejection_ = e.why;
    return -1;
  }
  return e.plan_workspace[size_t(e.plan)];
}

// The variant pack's entries of a ragged graph: the slot lengths (for q and kv) and the offsets.
void CudnnAttention::add_segments(std::unordered_map<int64_t, void*>& pack, const PackedSegments& seg) {
  pack[kSeqQ] = seg.seq_len;
  pack[kSeqKV] = seg.seq_len;
  pack[kQkvOff] = seg.qkv_offset;
  pack[kOutOff] = seg.out_offset;
  pack[kLseOff] = seg.lse_offset;
}

bool CudnnAttention::forward(void* out, float* lse, const void* qkv, int B, int T, int Hq, int Hkv, int D, Workspace ws,
                             const PackedSegments* seg, int slots) {
  Entry& e = entry(sequence_key(B, T, Hq, Hkv, D, false, seg ? slots : 0));
  if (!e.ok) {
    last_rejection_ = e.why;
    return false;
  }
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  const size_t head_bytes = size_t(D) * 2;
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + size_t(Hq) * head_bytes},
                                          {kV, base + size_t(Hq + Hkv) * head_bytes},
                                          {kO, out},
                                          {kStats, lse}};
  if (seg) add_segments(pack, *seg);
  return execute(e, pack, ws, "forward");
}

bool CudnnAttention::backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                              int T, int Hq, int Hkv, int D, Workspace ws, const PackedSegments* seg, int slots) {
  Entry& e = entry(sequence_key(B, T, Hq, Hkv, D, true, seg ? slots : 0));
  if (!e.ok) {
    last_rejection_ = e.why;
    return false;
  }
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  auto* dbase = static_cast<char*>(dqkv);
  const size_t head_bytes = size_t(D) * 2;
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + size_t(Hq) * head_bytes},
                                          {kV, base + size_t(Hq + Hkv) * head_bytes},
                                          {kO, const_cast<void*>(out)},
                                          {kdO, const_cast<void*>(dout)},
                                          {kStats, const_cast<float*>(lse)},
                                          {kdQ, dbase},
                                          {kdK, dbase + size_t(Hq) * head_bytes},
                                          {kdV, dbase + size_t(Hq + Hkv) * head_bytes}};
  if (seg) add_segments(pack, *seg);
  return execute(e, pack, ws, "backward");
}

int64_t CudnnAttention::block_workspace_needed(const Block& b, bool backward) {
  Entry& e = entry(block_key(b, backward));
  if (!e.ok) {
    last_rejection_ = e.why;
    return -1;
  }
  return e.plan_workspace[size_t(e.plan)];
}

bool CudnnAttention::block_forward(void* out_blk, float* lse_blk, const void* q_rows, const void* kv_rows,
                                   const Block& b, Workspace ws) {
  Entry& e = entry(block_key(b, false));
  if (!e.ok) {
    last_rejection_ = e.why;
    return false;
  }
  const size_t head_bytes = size_t(b.D) * 2;
  auto* kv = static_cast<char*>(const_cast<void*>(kv_rows));
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q_rows)},
                                          {kK, kv + size_t(b.Hq) * head_bytes},
                                          {kV, kv + size_t(b.Hq + b.Hkv) * head_bytes},
                                          {kO, out_blk},
                                          {kStats, lse_blk}};
  return execute(e, pack, ws, "block forward");
}

bool CudnnAttention::block_backward(void* dq_blk, void* dkv_blk, const void* dout_rows, const void* q_rows,
                                    const void* kv_rows, const void* out_rows, const float* lse_blk, const Block& b,
                                    Workspace ws) {
  Entry& e = entry(block_key(b, true));
  if (!e.ok) {
    last_rejection_ = e.why;
    return false;
  }
  const size_t head_bytes = size_t(b.D) * 2;
  auto* kv = static_cast<char*>(const_cast<void*>(kv_rows));
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q_rows)},
                                          {kK, kv + size_t(b.Hq) * head_bytes},
                                          {kV, kv + size_t(b.Hq + b.Hkv) * head_bytes},
                                          {kO, const_cast<void*>(out_rows)},
                                          {kdO, const_cast<void*>(dout_rows)},
                                          {kStats, const_cast<float*>(lse_blk)},
                                          {kdQ, dq_blk},
                                          {kdK, dkv_blk},
                                          {kdV, static_cast<char*>(dkv_blk) + size_t(b.Hkv) * head_bytes}};
  return execute(e, pack, ws, "block backward");
}

// Timing reruns the graph on the real tensors: both directions only write their outputs (O and
// Stats; dQ, dK, dV), from inputs they do not modify, so the extra runs leave what the chosen
// run leaves. It needs a host wait, so it is put off while the stream is captured into a CUDA
// graph (the step runs eagerly before it is captured).
bool CudnnAttention::execute(Entry& e, std::unordered_map<int64_t, void*>& pack, Workspace ws, const char* what) {
  // What is left of ws after what the caller took (Workspace::take starts at 256-byte boundaries).
  const size_t start = (ws.used + 255) & ~size_t(255);
  const size_t free_bytes = ws.bytes > start ? ws.bytes - start : 0;
  cudnnHandle_t h = as_handle(handle_);
  if (!e.timed) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    RECIPE_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
      e.timed = true;
      // Candidates may use the whole workspace the backend holds now: it gives every call all of
      // it and never shrinks, so a plan that wins here fits every later call. (Capping them at the
      // heuristic's plan kept its workspace-free sm80 forward at the Llama 3 8B shape, head dim
      // 128, ~2× slower than the sm90 plans that need workspace.)
      const int64_t limit = std::max<int64_t>(e.plan_workspace[size_t(e.plan)], int64_t(free_bytes));
      Workspace timing = ws;  // the run below takes its own region from the same start
      void* wsp = limit > 0 && size_t(limit) <= free_bytes ? timing.take(size_t(limit), "cuDNN attention plan timing")
                                                           : nullptr;
      cudaEvent_t start = nullptr, stop = nullptr;
      RECIPE_CUDA_CHECK(cudaEventCreate(&start));
      RECIPE_CUDA_CHECK(cudaEventCreate(&stop));
      float best_ms = 0.f;
      for (int64_t i = 0; i < int64_t(e.plan_workspace.size()); ++i) {
        const int64_t w = e.plan_workspace[size_t(i)];
        if (w < 0 || w > limit || (w > 0 && !wsp)) continue;
        if (!e.graph->execute_plan_at_index(h, pack, wsp, i).is_good()) continue;  // warm-up
        constexpr int kReps = 3;
        bool ran = true;
        RECIPE_CUDA_CHECK(cudaEventRecord(start, stream_));
        for (int r = 0; r < kReps && ran; ++r) ran = e.graph->execute_plan_at_index(h, pack, wsp, i).is_good();
        RECIPE_CUDA_CHECK(cudaEventRecord(stop, stream_));
        RECIPE_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0.f;
        RECIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (ran && (best_ms == 0.f || ms < best_ms)) best_ms = ms, e.plan = i;
      }
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
  }
  const size_t need = size_t(e.plan_workspace[size_t(e.plan)]);
  if (need > free_bytes) {
    last_rejection_ = std::string("cuDNN ") + what + " needs " + std::to_string(need) +
                      " bytes of workspace; raise kernels.workspace_mb";
    return false;
  }
  void* wsp = need ? ws.take(need, "cuDNN attention") : nullptr;
  fe::error_t st = e.graph->execute_plan_at_index(h, pack, wsp, e.plan);
  if (!st.is_good())
    throw std::runtime_error(std::string("CUDA backend: cuDNN SDPA ") + what + " execute failed: " + st.get_message());
  return true;
}

}  // namespace recipe::kernels::cuda

#endif  // RECIPE_WITH_CUDNN
