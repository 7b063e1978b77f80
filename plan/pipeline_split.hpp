// How the transformer layers split over the pipeline's model chunks (parallelism.pipeline_split):
// evenly, or balanced by compute with the output head counted against the stage that holds it.
//
// Why balance: an even split gives the last stage its layers plus the output head (the logits GEMM
// over the vocabulary, forward and backward, and the loss), and a pipeline runs at the pace of its
// slowest stage. At the ~1B Llama of the issue (d 2048, vocab 32000, 16 layers) the head costs
// 1.3 layers of FLOPs, so PP4 with 4+4+4+4 layers runs every stage at 5.3 layers' time (82% of
// what the work needs), while 5+4+4+3 runs at 5 (87%). Megatron-Core offers the same by hand
// (num_layers_in_first/last_pipeline_stage, account_for_loss_in_pipeline_split).
//
// The chunk list is in model order: pp·virtual_pp entries, stage k holding entries k, k+pp, ...
#pragma once

#include <vector>

#include "plan/plan.hpp"

namespace recipe::plan {

// The output head's training FLOPs per token (6·hidden·padded_vocab) in units of one transformer
// layer's (6·layer parameters + 12·attention width·seq, the MFU convention of model_size.hpp). The
// input embedding is a lookup (0). Needs the resolved shape (head_dim, ffn, padded vocab).
double head_cost_in_layers(const ModelConfig& m);

// num_layers over `chunks` model chunks, the first chunks taking the remainder.
std::vector<int> even_stage_layers(int num_layers, int chunks);

// Each pipeline stage's compute in layers: the layers of its chunks, plus head_layers on the last.
std::vector<double> stage_loads(const std::vector<int>& chunk_layers, int pp, double head_layers);
// The heaviest of those loads: the pace of the pipeline.
double heaviest_stage_load(const std::vector<int>& chunk_layers, int pp, double head_layers);

// The chunk sizes (each ≥ 1, summing to num_layers; needs pp·virtual_pp ≤ num_layers) whose
// heaviest stage is lightest: from the even split, one layer at a time moves from a chunk of the
// heaviest stage to a chunk of the lightest while that lowers the pair's maximum. Deterministic;
// with head_layers = 0 and a divisible count it is the even split.
std::vector<int> balanced_stage_layers(int num_layers, int pp, int virtual_pp, double head_layers);

}  // namespace recipe::plan
