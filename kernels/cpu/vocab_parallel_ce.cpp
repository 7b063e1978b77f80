// Vocab-parallel cross entropy: each tensor-parallel rank holds logits [n, Vl], the columns
// [vocab_start, vocab_start + Vl) of the full rows, whose first `valid_cols` columns are real vocabulary
// (the rest is padding). The three passes (row max, then Σexp and the target's logit, then loss and
// dlogits) are separated by the caller's max / sum reductions over the TP group. The gradient of row r
// is weighted by dloss[r] (f32 [n], the loss component's per-row weight).
//
// The arithmetic mirrors cross_entropy (loss.cpp) step for step: the max in f32, exp of the f32
// difference summed in double, lse = max + log(Σ) in double, prob = exp(logit − lse) in double. With one
// shard the only extra rounding is Σ being stored as f32 between passes, so losses and dlogits equal
// cross_entropy's to ~1e-7. Rows are independent; splitting them over threads does not change results.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {

// logits must be [n, Vl] f32 and 0 ≤ valid_cols ≤ Vl; returns Vl.
int64_t shard_columns(const char* op, const Tensor& logits, int64_t n, int valid_cols) {
  cpu::require_tensor(logits, op, "logits", DType::f32);
  const int64_t cols = logits.dim(-1);
  cpu::require(logits.ndim >= 1 && logits.numel() == n * cols, op,
               "logits " + logits.shape_str() + " must be [n=" + std::to_string(n) + ", shard columns]");
  cpu::require(valid_cols >= 0 && valid_cols <= cols, op,
               "valid_cols=" + std::to_string(valid_cols) + " must be in [0, shard columns " + std::to_string(cols) +
                   "] (clamp(vocab - vocab_start, 0, shard columns))");
  return cols;
}

void require_vocab_start(const char* op, int vocab_start) {
  cpu::require(vocab_start >= 0, op, "vocab_start=" + std::to_string(vocab_start) + " must not be negative");
}

// Rows per thread chunk are independent, so only the amount of work decides whether to fan out.
double row_work(int64_t n, int64_t cols) { return double(n) * double(cols) * 8.0; }

}  // namespace

void CpuBackend::vocab_parallel_ce_max(Tensor rowmax, Tensor logits, int valid_cols) {
  const char* op = "vocab_parallel_ce_max";
  cpu::require_tensor(rowmax, op, "rowmax", DType::f32);
  const int64_t n = rowmax.numel();
  const int64_t cols = shard_columns(op, logits, n, valid_cols);
  const float* z = logits.as<float>();
  float* m = rowmax.as<float>();
  cpu::parallel_for(n, threads(), row_work(n, valid_cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = z + r * cols;
      float max_z = -std::numeric_limits<float>::infinity();
      for (int v = 0; v < valid_cols; ++v) max_z = std::max(max_z, row[v]);
      m[r] = max_z;
    }
  });
}

void CpuBackend::vocab_parallel_ce_sums(const VocabParallelCeSumsArgs& args) {
  const Tensor sums = args.sums, logits = args.logits, rowmax = args.rowmax, targets = args.targets;
  const int vocab_start = args.vocab_start, valid_cols = args.valid_cols;
  const char* op = "vocab_parallel_ce_sums";
  cpu::require_tensor(targets, op, "targets", DType::i32);
  const int64_t n = targets.numel();
  const int64_t cols = shard_columns(op, logits, n, valid_cols);
  cpu::require_tensor(rowmax, op, "rowmax", DType::f32);
  cpu::require_numel(rowmax, n, op, "rowmax");
  cpu::require_tensor(sums, op, "sums", DType::f32);
  cpu::require_numel(sums, 2 * n, op, "sums");
  require_vocab_start(op, vocab_start);
  const int32_t* tgt = targets.as<int32_t>();
  // A shard with padding columns holds the end of the vocabulary, so it knows the vocab size and can
  // refuse targets past it (other shards cannot tell such a target from one in a later shard).
  if (valid_cols < cols) {
    const int64_t vocab = int64_t(vocab_start) + valid_cols;
    for (int64_t r = 0; r < n; ++r)
      cpu::require(tgt[r] < vocab, op,
                   "target " + std::to_string(tgt[r]) + " at row " + std::to_string(r) + " is outside the vocab [0, " +
                       std::to_string(vocab) + "); is the tokenizer's vocab larger than model.vocab_size?");
  }
  const float* z = logits.as<float>();
  const float* m = rowmax.as<float>();
  float* exp_sum = sums.as<float>();
  float* target_logit = exp_sum + n;
  cpu::parallel_for(n, threads(), row_work(n, valid_cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = z + r * cols;
      double sum = 0.0;
      for (int v = 0; v < valid_cols; ++v) sum += std::exp(double(row[v] - m[r]));
      exp_sum[r] = float(sum);
      const int64_t local = int64_t(tgt[r]) - vocab_start;
      target_logit[r] = tgt[r] >= 0 && local >= 0 && local < valid_cols ? row[local] : 0.0f;
    }
  });
}

void CpuBackend::vocab_parallel_ce_finish(const VocabParallelCeFinishArgs& args) {
  const Tensor losses = args.losses, logits = args.logits, rowmax = args.rowmax, sums = args.sums,
               targets = args.targets;
  const int vocab_start = args.vocab_start, valid_cols = args.valid_cols;
  const bool compute_grad = args.compute_grad;
  const char* op = "vocab_parallel_ce_finish";
  cpu::require_tensor(targets, op, "targets", DType::i32);
  const int64_t n = targets.numel();
  const int64_t cols = shard_columns(op, logits, n, valid_cols);
  cpu::require_tensor(losses, op, "losses", DType::f32);
  cpu::require_numel(losses, n, op, "losses");
  cpu::require_tensor(rowmax, op, "rowmax", DType::f32);
  cpu::require_numel(rowmax, n, op, "rowmax");
  cpu::require_tensor(sums, op, "sums", DType::f32);
  cpu::require_numel(sums, 2 * n, op, "sums");
  require_vocab_start(op, vocab_start);
  if (compute_grad) {
    cpu::require_tensor(args.dloss, op, "dloss", DType::f32);
    cpu::require_numel(args.dloss, n, op, "dloss");
  }
  const float* row_dloss = compute_grad ? args.dloss.as<float>() : nullptr;
  const int32_t* tgt = targets.as<int32_t>();
  const float* m = rowmax.as<float>();
  const float* exp_sum = sums.as<float>();
  const float* target_logit = exp_sum + n;
  float* loss = losses.as<float>();
  float* z = logits.as<float>();
  const double work = compute_grad ? row_work(n, valid_cols) : 0.0;
  cpu::parallel_for(n, threads(), work, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = z + r * cols;
      if (tgt[r] < 0) {
        loss[r] = 0.0f;
        if (compute_grad) std::memset(row, 0, sizeof(float) * size_t(cols));
        continue;
      }
      const double lse = double(m[r]) + std::log(double(exp_sum[r]));
      loss[r] = float(lse - double(target_logit[r]));
      if (!compute_grad) continue;
      const int64_t local = int64_t(tgt[r]) - vocab_start;
      const float dloss = row_dloss[r];
      for (int v = 0; v < valid_cols; ++v) {
        const double prob = std::exp(double(row[v]) - lse);
        row[v] = float((prob - (v == local ? 1.0 : 0.0)) * double(dloss));
      }
      for (int64_t v = valid_cols; v < cols; ++v) row[v] = 0.0f;
    }
  });
}

}  // namespace recipe::kernels
