// The model's token contract in one place: a sample row holds T+1 token ids; the model reads
// inputs = row[0, T) and targets = row[1, T+1), every id inside the vocabulary. Model::load_tokens
// and the trainer's CUDA-graph staging both split rows with this routine.
#pragma once

#include <cstdint>

namespace recipe::core {

// rows: host i32 [B, T+1]. Writes inputs[b·T + t] = rows[b][t] and targets[b·T + t] = rows[b][t+1]
// (each [B·T]). Throws std::runtime_error naming the id, row and position when an id is outside
// [0, vocab), before writing that row.
void split_token_rows(const int32_t* rows, int B, int T, int vocab, int32_t* inputs, int32_t* targets);

// Masked data (data.kind=sft) comes as inputs and targets already split (each [B·T]); a target may
// also be -1 (no loss). Throws like split_token_rows when an input is outside [0, vocab) or a target
// outside [-1, vocab).
void check_split_tokens(const int32_t* inputs, const int32_t* targets, int B, int T, int vocab);

// Packed samples: positions [B·T] hold each token's position inside its sample, so each value is 0
// (a sample starts) or one more than the value before it in its row (kernels/ops.hpp). Throws
// std::runtime_error naming the row and position otherwise, or when a row holds more than
// max_samples samples (max_samples > 0; ModelShape::max_samples).
void check_sample_positions(const int32_t* positions, int B, int T, int max_samples = 0);

}  // namespace recipe::core
