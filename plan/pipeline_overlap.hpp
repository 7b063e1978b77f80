// The issue order of a pipeline stage with its exchanges overlapped (parallelism.pp_comm_overlap):
// each neighbour exchange (send and/or receive of stage tensors, plan/pipeline_order.hpp) is started
// as soon as the data it moves allows, and a forward or backward waits only for the exchanges that
// touch its own activation slot, not for every exchange before it.
//
// Why: in the blocking order (pipeline_order's list run one op after the other) the compute stream
// waits for each exchange at its place in the list, so every transfer adds its time to the stage's
// critical path. The interleaved schedule exchanges twice per round (x, then dx) before running a
// forward and a backward: the dx exchange can travel while the forward runs, and the next round's
// x exchange (which sends that forward's output) while the backward runs. Megatron-Core calls this
// overlap_p2p_comm. Off by default: measured on 4 NVLink H100s it gains 2.7% at virtual_pp 4 and
// loses 1.5-3% at virtual_pp 2 and 1F1B, because an NCCL kernel started early waits for its peer
// on SMs that the compute beside it needs (docs/performance.md).
//
// The rule, per (local chunk, activation slot), the unit the stage tensors live in
// (Model::stage_input/stage_output/stage_output_grad/stage_input_grad of one slot):
// - an exchange moves earlier in the list, past forwards and backwards that touch none of its slots,
//   but never past another exchange (every rank posts its exchanges in the blocking order, so the
//   communicator matches them as before and no new wait can form a cycle: each new dependency is
//   one the blocking order had);
// - when it is started, everything issued before it on the compute stream is done before it runs
//   (NCCL: the comm stream waits on the compute stream; MPI: the host ran it), so it sends a
//   finished output and receives into a slot whose previous micro-batch is done with it;
// - a forward or backward first waits for every started exchange that touches its slot: its
//   received input or gradient is there, and a send still reading a buffer it will overwrite is done.
#pragma once

#include <utility>
#include <vector>

#include "plan/pipeline_order.hpp"

namespace recipe::plan {

// Forward or backward (not an exchange).
bool is_compute(const PipeOp& op);

// The (local chunk, slot) pairs an op touches: its micro-batch's, and for a combined exchange also
// the received micro-batch's. `slots[c]`: the activation slots of local chunk c (micro-batch m of
// chunk c lives in slot m mod slots[c]; pipeline_slots).
std::vector<std::pair<int, int>> touched_slots(const PipeOp& op, const std::vector<int>& slots);

// The same ops as `ops` (a stage's blocking order), with each exchange moved as early as the rule
// above allows. Forwards and backwards keep their order, and so do the exchanges.
std::vector<PipeOp> overlapped_order(const std::vector<PipeOp>& ops, const std::vector<int>& slots);

}  // namespace recipe::plan
