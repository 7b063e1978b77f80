// Token and position embeddings. wte holds rows [vocab_start, vocab_start + rows) of the vocabulary
// (a vocab-parallel shard); tokens outside the shard read a zero row and produce no gradient, so
// summing the shards' outputs over TP gives the full embedding. wpe[p(t)] is added at row n, t = n % T,
// p(t) = positions[t] (context parallelism: the row's position in the whole sample) or t.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
struct EmbeddingShape {
  int64_t N, C, rows;
};

EmbeddingShape embedding_shape(const char* op, const Tensor& tokens, const Tensor& table, const Tensor& wpe, int T) {
  cpu::require_tensor(tokens, op, "tokens", DType::i32);
  cpu::require_tensor(table, op, "wte", DType::f32);
  cpu::require(table.ndim == 2, op, "wte must be [vocab rows, C], got " + table.shape_str());
  int64_t N = tokens.numel(), C = table.dim(1);
  if (wpe.defined()) {
    cpu::require_tensor(wpe, op, "wpe", DType::f32);
    cpu::require(T > 0 && N % T == 0, op,
                 "T=" + std::to_string(T) + " must be positive and divide the " + std::to_string(N) + " tokens");
    cpu::require(wpe.ndim == 2 && wpe.dim(1) == C && wpe.dim(0) >= T, op,
                 "wpe " + wpe.shape_str() + " must be [max_positions >= T=" + std::to_string(T) +
                     ", C=" + std::to_string(C) + "]");
  }
  return {N, C, table.dim(0)};
}

// The table row of each of the T rows of a sample: positions[t] (checked against the table's
// rows), or t.
std::vector<int64_t> position_rows(const char* op, const Tensor& positions, int T, int64_t table_rows) {
  std::vector<int64_t> rows(size_t(std::max(T, 0)));
  for (int t = 0; t < T; ++t) rows[size_t(t)] = t;
  if (!positions.defined()) return rows;
  cpu::require_tensor(positions, op, "positions", DType::i32);
  cpu::require_numel(positions, T, op, "positions");
  const int32_t* pos = positions.as<int32_t>();
  for (int t = 0; t < T; ++t) {
    cpu::require(pos[t] >= 0 && pos[t] < table_rows, op,
                 "positions[" + std::to_string(t) + "] = " + std::to_string(pos[t]) + " is outside the " +
                     std::to_string(table_rows) + " rows of the position table");
    rows[size_t(t)] = pos[t];
  }
  return rows;
}
}  // namespace

void CpuBackend::embedding_fwd(const EmbeddingFwdArgs& args) {
  const Tensor out = args.out, tokens = args.tokens, wte = args.wte, wpe = args.wpe;
  const int T = args.T, vocab_start = args.vocab_start;
  const char* op = "embedding_fwd";
  auto [N, C, rows] = embedding_shape(op, tokens, wte, wpe, T);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_numel(out, N * C, op, "out");
  const int32_t* tok = tokens.as<int32_t>();
  const float* table = wte.as<float>();
  float* o = out.as<float>();
  const std::vector<int64_t> prow =
      wpe.defined() ? position_rows(op, args.positions, T, wpe.dim(0)) : std::vector<int64_t>();
  for (int64_t n = 0; n < N; ++n) {
    int64_t row = int64_t(tok[n]) - vocab_start;
    float* dst = o + n * C;
    if (row >= 0 && row < rows) {
      const float* src = table + row * C;
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c];
    } else {
      for (int64_t c = 0; c < C; ++c) dst[c] = 0.0f;
    }
    if (wpe.defined()) {
      const float* pos = wpe.as<float>() + prow[size_t(n % T)] * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += pos[c];
    }
  }
}

void CpuBackend::embedding_bwd(const EmbeddingBwdArgs& args) {
  const Tensor dwte = args.dwte, dwpe = args.dwpe, dout = args.dout, tokens = args.tokens;
  const int T = args.T, vocab_start = args.vocab_start;
  const char* op = "embedding_bwd";
  if (!dwte.defined() && !dwpe.defined()) return;
  // Shapes are checked against whichever gradient is present; dwte stands in for wte.
  int64_t N = tokens.numel(), C = 0, rows = 0;
  if (dwte.defined()) {
    auto s = embedding_shape(op, tokens, dwte, dwpe, T);
    C = s.C, rows = s.rows;
  } else {
    cpu::require_tensor(tokens, op, "tokens", DType::i32);
    cpu::require_tensor(dwpe, op, "dwpe", DType::f32);
    cpu::require(dwpe.ndim == 2 && T > 0 && N % T == 0 && dwpe.dim(0) >= T, op,
                 "dwpe " + dwpe.shape_str() + " must be [max_positions >= T, C] with T=" + std::to_string(T) +
                     " dividing the " + std::to_string(N) + " tokens");
    C = dwpe.dim(1);
  }
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_numel(dout, N * C, op, "dout");
  const int32_t* tok = tokens.as<int32_t>();
  const float* g = dout.as<float>();
  const std::vector<int64_t> prow =
      dwpe.defined() ? position_rows(op, args.positions, T, dwpe.dim(0)) : std::vector<int64_t>();
  // Rows are scattered in token order: repeated tokens always add in the same sequence.
  for (int64_t n = 0; n < N; ++n) {
    const float* src = g + n * C;
    if (dwte.defined()) {
      int64_t row = int64_t(tok[n]) - vocab_start;
      if (row >= 0 && row < rows) {
        float* dst = dwte.as<float>() + row * C;
        for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
      }
    }
    if (dwpe.defined()) {
      float* dst = dwpe.as<float>() + prow[size_t(n % T)] * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace recipe::kernels
