// The pipeline orders, as pure lists of PipeOps (no ranks, no tensors): the derivation that the
// training core runs (core/train/pipeline_schedule.hpp) and that the memory estimate counts the
// activation slots of (plan/memory_estimate.cpp), so the estimate and the engine's arena agree.
//
// In which order one pipeline stage runs the forwards and backwards of a
// step's micro-batches and exchanges stage tensors with its neighbours. Training uses 1F1B
// (Megatron's non-interleaved schedule): stage k of P first runs P-k-1 warm-up forwards, then
// alternates one forward and one backward, then runs the remaining backwards, so at most P-k
// micro-batches are in flight on it (its activation slots). With one stage it is F0 B0 F1 B1 ...
// Evaluation runs forwards only.
//
// Interleaved 1F1B (Megatron's virtual pipeline, parallelism.virtual_pp = V ≥ 2): the layers form
// P·V model chunks; stage k holds chunks k, k+P, k+2P, ... (its local chunks 0..V-1), so a
// micro-batch goes round the stages V times: the last stage's local chunk c feeds the first
// stage's local chunk c+1, and gradients go round the other way. The micro-batches run in groups
// of P (count % P == 0): virtual forward i is local chunk (i mod P·V) / P of micro-batch
// (i / (P·V))·P + i mod P, virtual backward i the same with the chunks in reverse. Stage k runs
// (P-k-1)·2 + (V-1)·P warm-up forwards (all of them when count == P), then one forward and one
// backward at a time, then the remaining backwards. The bubble shrinks from (P-1)/count to
// (P-1)/(V·count) of the step, for more activations in flight and V times the point-to-point traffic.
//
// The exchanges of the interleaved schedule are placed by running all stages in lock-step rounds
// (interleaved_1f1b): in a round each stage runs what its inputs allow (at most one forward and
// one backward, in its order), then every stage sends what it produced (x to the next stage,
// dx to the previous, round the ring) and receives what its neighbours produced in the same
// round. Every send meets its receive in the same round, so no stage waits on another in a cycle
// (the neighbours post both halves of each exchange together), and over one pair of ranks the
// tensors travel in the order both sides post them (pp = 2: x and dx share the one channel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recipe::plan {

struct PipeOp {
  enum Kind : uint8_t {
    forward,                           // forward of micro-batch m
    backward,                          // backward of m
    recv_input,                        // m's stage input from the previous stage
    send_output,                       // m's stage output to the next stage
    recv_output_grad,                  // d(m's stage output) from the next stage
    send_input_grad,                   // d(m's stage input) to the previous stage
    send_output_recv_output_grad,      // m's output to the next stage, d(m2's output) from it
    send_input_grad_recv_input,        // d(m's input) to the previous stage, m2's input from it
    send_output_recv_input,            // m's output to the next stage, m2's input from the previous one
    send_input_grad_recv_output_grad,  // d(m's input) to the previous stage, d(m2's output) from the next
  };
  Kind kind = forward;
  int m = 0;
  int m2 = -1;  // the received micro-batch of a combined send_recv
  // The local model chunk (0..V-1) of m and of m2 (interleaved schedule; 0 otherwise). Stage k's
  // neighbours are k±1 round the ring, so the last stage's next is the first.
  int chunk = 0, chunk2 = 0;
  bool operator==(const PipeOp&) const = default;
};

// The training order of stage `stage` of `stages` over `count` micro-batches (1F1B). Sends and
// receives appear only where there is a neighbour (none before the first stage or after the last).
std::vector<PipeOp> one_f_one_b(int stages, int stage, int count);
// The interleaved order of stage `stage` with `chunks` ≥ 2 model chunks per stage (see above);
// count must be a multiple of stages (the resolver checks trainer.num_micro_batches).
std::vector<PipeOp> interleaved_1f1b(int stages, int stage, int chunks, int count);
// The training order of a plan: one_f_one_b for one chunk per stage, else interleaved_1f1b.
std::vector<PipeOp> training_order(int stages, int stage, int chunks, int count);
// The forward-only order. One chunk: receive m's input, forward m, send m's output. Several: the
// interleaved forwards (groups of up to `stages` micro-batches, any count), exchanges in rounds.
std::vector<PipeOp> forward_only(int stages, int stage, int count, int chunks = 1);
// Activation slots a stage needs under 1F1B: the micro-batches in flight on it at once.
int pipeline_slots(int stages, int stage, int count);
// Activation slots of each local chunk under training_order: the most micro-batches of the chunk
// live at once, from the op that first touches one (its input's receive or its forward) to the
// op that last does (its backward or the send of its input gradient). The live micro-batches of a
// chunk are always consecutive, so micro-batch m uses slot m mod slots of its chunk.
std::vector<int> pipeline_slots(int stages, int stage, int chunks, int count);
// One token per op, for tests and messages: F3 / B3 (forward / backward of micro-batch 3), Sx3 /
// Rx3 (send / receive its stage output / input), Sdx3 / Rdx3 (the same for its gradient), and
// "Sx3|Rdx0" for a combined send_recv. Lists with several chunks name the chunk first: F1.3 is
// the forward of micro-batch 3 through local chunk 1.
std::string to_string(const std::vector<PipeOp>& ops);

}  // namespace recipe::plan
