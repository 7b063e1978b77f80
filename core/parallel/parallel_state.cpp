#include "core/parallel/parallel_state.hpp"

#include <stdexcept>

namespace recipe::core {

// The resolver's sizes (dp derived, world = tp·cp·dp·pp), read as they are.
ParallelSizes parallel_sizes(const plan::Plan& plan) {
  const auto& p = plan.parallelism;
  return ParallelSizes{p.tp, p.cp, p.dp, p.pp};
}

RankCoords rank_coords(const ParallelSizes& s, int r) {
  if (r < 0 || r >= s.world())
    throw std::invalid_argument("rank " + std::to_string(r) + " outside a world of " + std::to_string(s.world()));
  RankCoords c;
  c.tp = r % s.tp;
  r /= s.tp;
  c.cp = r % s.cp;
  r /= s.cp;
  c.dp = r % s.dp;
  c.pp = r / s.dp;
  return c;
}

int world_rank_of(const ParallelSizes& s, const RankCoords& c) {
  return c.tp + s.tp * (c.cp + s.cp * (c.dp + s.dp * c.pp));
}

std::vector<int> group_ranks(const ParallelSizes& s, int world_rank, Group g) {
  RankCoords c = rank_coords(s, world_rank);
  int n = g == Group::tp ? s.tp : g == Group::cp ? s.cp : g == Group::dp ? s.dp : s.pp;
  std::vector<int> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    RankCoords m = c;
    (g == Group::tp ? m.tp : g == Group::cp ? m.cp : g == Group::dp ? m.dp : m.pp) = i;
    out.push_back(world_rank_of(s, m));
  }
  return out;
}

std::vector<int> embedding_group_ranks(const ParallelSizes& s, int world_rank) {
  if (s.pp == 1) return {world_rank};
  RankCoords c = rank_coords(s, world_rank);
  // A middle stage holds no embedding: it is in no embedding group but its own.
  if (c.pp != 0 && c.pp != s.pp - 1) return {world_rank};
  RankCoords first = c, last = c;
  first.pp = 0;
  last.pp = s.pp - 1;
  return {world_rank_of(s, first), world_rank_of(s, last)};
}

ParallelState ParallelState::single_process() {
  return ParallelState(ParallelSizes{}, 0, std::make_unique<SingleProcessComm>("world"),
                       std::make_unique<SingleProcessComm>("tp"), std::make_unique<SingleProcessComm>("cp"),
                       std::make_unique<SingleProcessComm>("dp"), std::make_unique<SingleProcessComm>("pp"));
}

ParallelState::ParallelState(ParallelSizes sizes, int world_rank, std::unique_ptr<Comm> world, std::unique_ptr<Comm> tp,
                             std::unique_ptr<Comm> cp, std::unique_ptr<Comm> dp, std::unique_ptr<Comm> pp,
                             std::unique_ptr<Comm> embedding)
    : sizes_(sizes),
      coords_(rank_coords(sizes, world_rank)),
      world_rank_(world_rank),
      world_(std::move(world)),
      tp_(std::move(tp)),
      cp_(std::move(cp)),
      dp_(std::move(dp)),
      pp_(std::move(pp)),
      embedding_(embedding ? std::move(embedding) : std::make_unique<SingleProcessComm>("embedding")) {
  auto check = [](const Comm* c, int want, const char* what) {
    if (!c) throw std::invalid_argument(std::string("ParallelState: missing ") + what + " communicator");
    if (c->size() != want)
      throw std::invalid_argument(std::string("ParallelState: ") + what + " communicator has " +
                                  std::to_string(c->size()) + " ranks, the layout needs " + std::to_string(want));
  };
  check(world_.get(), sizes_.world(), "world");
  check(tp_.get(), sizes_.tp, "tp");
  check(cp_.get(), sizes_.cp, "cp");
  check(dp_.get(), sizes_.dp, "dp");
  check(pp_.get(), sizes_.pp, "pp");
  check(embedding_.get(), int(embedding_group_ranks(sizes_, world_rank_).size()), "embedding");
}

}  // namespace recipe::core
