#include "core/train/grad_sync.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recipe::core {

namespace {

struct Run {
  int64_t begin, end;
  int phase;
  bool decay;
};

// Maximal runs of consecutive tensors with one ready phase, in buffer order, each extended to the
// next run's start (or its group's end) so that alignment gaps belong to a run.
std::vector<Run> phase_runs(const ParamLayout& L) {
  std::vector<const ParamSpec*> ps;
  for (const auto& p : L.params)
    if (p.trainable) ps.push_back(&p);  // a frozen base has no gradient to reduce or count
  std::sort(ps.begin(), ps.end(), [](const ParamSpec* a, const ParamSpec* b) { return a->offset < b->offset; });
  std::vector<Run> runs;
  for (const ParamSpec* p : ps) {
    if (!runs.empty() && runs.back().phase == p->ready_phase && runs.back().decay == p->weight_decay) continue;
    if (!runs.empty()) runs.back().end = p->offset;
    runs.push_back({p->offset, 0, p->ready_phase, p->weight_decay});
  }
  // Close each run: at the next run's start, or at its group's end.
  for (size_t i = 0; i < runs.size(); ++i) {
    const int64_t group_end = runs[i].decay ? L.decay_begin + L.decay_numel : L.nodecay_begin + L.nodecay_numel;
    const bool next_same_group = i + 1 < runs.size() && runs[i + 1].decay == runs[i].decay;
    runs[i].end = next_same_group ? runs[i + 1].begin : group_end;
  }
  return runs;
}

}  // namespace

std::vector<GradBucket> make_grad_buckets(const ParamLayout& L, int64_t target) {
  std::vector<GradBucket> out;
  for (const Run& r : phase_runs(L)) {
    const bool extend = !out.empty() && out.back().decay == r.decay && out.back().numel < target &&
                        out.back().begin + out.back().numel == r.begin;
    if (extend) {
      out.back().numel = r.end - out.back().begin;
      out.back().ready_phase = std::max(out.back().ready_phase, r.phase);
    } else {
      out.push_back({r.begin, r.end - r.begin, r.phase, r.decay});
    }
  }
  return out;
}

GradSync::GradSync(const ParamLayout& layout, Comm& dp, bool zero1, int64_t target_elems)
    : buckets_(make_grad_buckets(layout, target_elems)), dp_(dp), zero1_(zero1) {
  if (zero1_) {
    for (const GradBucket& b : buckets_)
      if (b.numel % dp_.size() != 0 || b.begin % dp_.size() != 0)
        throw std::logic_error("GradSync: bucket [" + std::to_string(b.begin) + ", +" + std::to_string(b.numel) +
                               ") does not split into " + std::to_string(dp_.size()) +
                               " equal chunks; the layout needs align = kParamAlign·dp");
  }
  started_.assign(buckets_.size(), false);
}

GradSync::GradSync(const ParamLayout& layout, Comm& dp, bool zero1, int64_t target_elems,
                   kernels::Backend* bf16_backend)
    : GradSync(layout, dp, zero1, target_elems) {
  if (!bf16_backend || dp_.size() == 1) return;  // one DP rank reduces nothing
  int64_t total = 0;
  for (const GradBucket& b : buckets_) {
    staging_offset_.push_back(total);
    total += b.numel;
  }
  bf16_backend_ = bf16_backend;
  staging_ = bf16_backend_->alloc(size_t(std::max<int64_t>(total, 1)) * 2);
}

GradSync::~GradSync() {
  if (staging_) bf16_backend_->free(staging_);
}

kernels::Tensor GradSync::staging(size_t i) const {
  return kernels::Tensor(static_cast<uint16_t*>(staging_) + staging_offset_[i], kernels::DType::bf16,
                         bf16_backend_->device(), {buckets_[i].numel});
}

int64_t GradSync::state_numel() const {
  int64_t n = 0;
  for (const GradBucket& b : buckets_) n += zero1_ ? b.numel / dp_.size() : b.numel;
  return n;
}

void GradSync::begin() { started_.assign(buckets_.size(), false); }

void GradSync::start(ParamStore& store, size_t i) {
  started_[i] = true;
  if (dp_.size() == 1) return;
  const GradBucket& b = buckets_[i];
  kernels::Tensor g = store.grad_span(b.begin, b.numel);
  if (bf16_backend_) {  // the collective moves a bf16 copy; finish() casts the sums back
    kernels::Tensor h = staging(i);
    bf16_backend_->cast(h, g);
    g = h;
  }
  if (zero1_) {
    const int64_t chunk = b.numel / dp_.size();
    dp_.reduce_scatter_sum_start(g.rows(dp_.rank() * chunk, chunk), g);
  } else {
    dp_.all_reduce_sum_start(g);
  }
}

void GradSync::on_phase(ParamStore& store, int phase) {
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (!started_[i] && buckets_[i].ready_phase <= phase) start(store, i);
}

void GradSync::finish(ParamStore& store) {
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (!started_[i]) start(store, i);
  dp_.wait_all();
  // wait_all() completed any weight gather the forward had no phase for too.
  gathering_.assign(gathering_.size(), false);
  if (!bf16_backend_) return;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const GradBucket& b = buckets_[i];
    if (zero1_) {
      const int64_t chunk = b.numel / dp_.size();
      bf16_backend_->cast(store.grad_span(b.begin + dp_.rank() * chunk, chunk),
                          staging(i).rows(dp_.rank() * chunk, chunk));
    } else {
      bf16_backend_->cast(store.grad_span(b.begin, b.numel), staging(i));
    }
  }
}

std::vector<OptimizerSegment> GradSync::optimizer_segments(const ParamLayout& layout) const {
  if (!zero1_) return whole_groups(layout);
  std::vector<OptimizerSegment> segs;
  int64_t state = 0;
  for (const GradBucket& b : buckets_) {
    const int64_t chunk = b.numel / dp_.size();
    segs.push_back({b.begin + dp_.rank() * chunk, chunk, state, b.decay});
    state += chunk;
  }
  return segs;
}

void GradSync::set_overlap_gather(bool on) {
  overlap_gather_ = on && zero1_ && dp_.size() > 1;
  forward_order_.clear();
  for (size_t i = 0; i < buckets_.size(); ++i) forward_order_.push_back(i);
  std::stable_sort(forward_order_.begin(), forward_order_.end(),
                   [&](size_t a, size_t b) { return buckets_[a].ready_phase > buckets_[b].ready_phase; });
  gathers_.assign(buckets_.size(), Comm::Op{});
  gathering_.assign(buckets_.size(), false);
}

void GradSync::gather_all_blocking(ParamStore& store) {
  for (const GradBucket& b : buckets_) {
    const int64_t chunk = b.numel / dp_.size();
    kernels::Tensor w = store.compute_span(b.begin, b.numel);
    dp_.all_gather(w, w.rows(dp_.rank() * chunk, chunk));
  }
}

void GradSync::weights_updated(ParamStore& store) {
  if (!zero1_ || dp_.size() == 1) return;
  if (overlap_gather_)
    stale_ = true;
  else
    gather_all_blocking(store);
}

void GradSync::start_weight_gathers(ParamStore& store) {
  if (!overlap_gather_) return;
  for (size_t i : forward_order_) {
    if (gathering_[i]) continue;  // still in flight from a start no forward waited for
    const GradBucket& b = buckets_[i];
    const int64_t chunk = b.numel / dp_.size();
    kernels::Tensor w = store.compute_span(b.begin, b.numel);
    gathers_[i] = dp_.all_gather_start(w, w.rows(dp_.rank() * chunk, chunk));
    gathering_[i] = true;
  }
  stale_ = false;
}

void GradSync::wait_weights(int phase) {
  if (!overlap_gather_) return;
  for (size_t i : forward_order_) {
    if (buckets_[i].ready_phase < phase) break;  // forward order: the rest are needed later
    if (!gathering_[i]) continue;
    dp_.wait(gathers_[i]);
    gathering_[i] = false;
  }
}

void GradSync::complete_weights(ParamStore& store) {
  if (!overlap_gather_) return;
  if (stale_) start_weight_gathers(store);
  bool any = false;
  for (size_t i : forward_order_) {
    if (!gathering_[i]) continue;
    dp_.wait(gathers_[i]);
    gathering_[i] = false;
    any = true;
  }
  if (any) dp_.wait_all();  // NCCL: the comm stream joined; MPI: the waited requests dropped
}

void GradSync::gather_masters(ParamStore& store) {
  if (!zero1_ || dp_.size() == 1 || store.compute_is_master()) return;
  for (const GradBucket& b : buckets_) {
    const int64_t chunk = b.numel / dp_.size();
    kernels::Tensor w = store.master_span(b.begin, b.numel);
    dp_.all_gather(w, w.rows(dp_.rank() * chunk, chunk));
  }
}

std::vector<std::pair<int64_t, int64_t>> GradSync::norm_ranges(const ParamLayout& L, const RankCoords& c,
                                                               bool tied) const {
  // Context parallelism: every CP rank holds the whole (CP-summed) gradient; CP rank 0 counts it.
  if (c.cp != 0) return {};
  // Tensors this rank counts, before the DP split; runs of counted tensors merge across the
  // (zero) alignment gaps between them, so there are few ranges.
  std::vector<const ParamSpec*> ps;
  for (const auto& p : L.params)
    if (p.trainable) ps.push_back(&p);  // a frozen base has no gradient to reduce or count
  std::sort(ps.begin(), ps.end(), [](const ParamSpec* a, const ParamSpec* b) { return a->offset < b->offset; });
  std::vector<std::pair<int64_t, int64_t>> counted;
  bool open = false;
  for (const ParamSpec* p : ps) {
    const bool count =
        !(p->tp_replicated() && c.tp != 0) && !(tied && !L.first_stage && p->name == word_embedding_name());
    if (!count) {
      open = false;
    } else if (open) {
      counted.back().second = p->offset + p->numel;
    } else {
      counted.push_back({p->offset, p->offset + p->numel});
      open = true;
    }
  }
  // Intersect with what this DP rank owns.
  std::vector<std::pair<int64_t, int64_t>> owned;
  if (zero1_) {
    for (const GradBucket& b : buckets_) {
      const int64_t chunk = b.numel / dp_.size();
      owned.push_back({b.begin + dp_.rank() * chunk, b.begin + (dp_.rank() + 1) * chunk});
    }
  } else if (dp_.rank() == 0) {
    owned.push_back({0, L.trainable_numel});
  }
  std::sort(owned.begin(), owned.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  size_t j = 0;
  for (const auto& [a, b] : counted) {
    while (j < owned.size() && owned[j].second <= a) ++j;
    for (size_t k = j; k < owned.size() && owned[k].first < b; ++k) {
      const int64_t lo = std::max(a, owned[k].first), hi = std::min(b, owned[k].second);
      if (lo >= hi) continue;
      if (!out.empty() && out.back().second == lo)
        out.back().second = hi;
      else
        out.push_back({lo, hi});
    }
  }
  return out;
}

}  // namespace recipe::core
