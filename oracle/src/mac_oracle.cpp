/*! \file mac_oracle.cpp
 *  \brief MacOracle: the MAC algebra of docs/semantics.md §3 for given decisions, in FP64, on top
 * of the compensated engine of attend.cpp. Independent of mac::ref::DecodeStepper.
 */
#include "mac/oracle/oracle.hpp"

#include <algorithm>
#include <cmath>

namespace mac::oracle {

using ref::LayerData;
using ref::merge;

MacOracle::MacOracle(const LayerData& layer, double scale, const MacParams& params, int64_t prefill)
    : layer_(layer), scale_(scale), params_(params), prefill_(prefill) {
  params_.validate();
  require(std::isfinite(scale) && scale > 0, "MacOracle: softmax scale = ", scale,
          " must be finite and > 0");
  layer.validate("MacOracle layer");
  require(0 <= prefill && prefill <= layer.tokens, "MacOracle: prefill P = ", prefill,
          " outside [0, ", layer.tokens, "]");
  const int64_t hq = layer.num_q_heads, g = layer.group_size(), d = layer.head_dim;
  slots_ = std::min(params_.ring, std::max<int64_t>(layer.tokens, 1));
  ring_.assign(static_cast<size_t>(checked_product("oracle ring [Hq, slots]", {hq, slots_})),
               Slot{-1, State::empty(d)});

  // Prefill entries: entry(p) = attn(q_post(p), [Fe(E(p)), E(p))) for p ∈ [max(0, P−M), P),
  // a batch of positions per engine call (the engine parallelises inside each call).
  constexpr int64_t kBatch = 8;
  const int64_t p0 = std::max<int64_t>(0, prefill - params_.ring);
  for (int64_t b0 = p0; b0 < prefill; b0 += kBatch) {
    const int64_t b1 = std::min(prefill, b0 + kBatch);
    std::vector<SegmentQuery> qs;
    qs.reserve(static_cast<size_t>((b1 - b0) * hq));
    for (int64_t p = b0; p < b1; ++p) {
      const int64_t e = prefix_end(p, params_.tail);
      for (int64_t h = 0; h < hq; ++h)
        qs.push_back({h / g, layer.q_post_at(p, h), {sink_end(params_.sinks, e), e}});
    }
    const auto st = attend_segments(layer, scale, qs);
    for (int64_t p = b0; p < b1; ++p)
      for (int64_t h = 0; h < hq; ++h) slot(h, p) = Slot{p, st[(p - b0) * hq + h].front()};
  }
}

const State* MacOracle::entry(int64_t head, int64_t pos) const {
  if (head < 0 || head >= layer_.num_q_heads || pos < 0) return nullptr;
  if (pos >= layer_.tokens) return nullptr;  // never held: slots cover positions < T
  const Slot& s = ring_[head * slots_ + pos % slots_];
  return s.pos == pos ? &s.state : nullptr;
}

StepResult MacOracle::step(int64_t m, const std::vector<Decision>& decisions) {
  const int64_t hq = layer_.num_q_heads, g = layer_.group_size();
  const int64_t r = params_.tail, F = params_.sinks, M = params_.ring;
  require(static_cast<int64_t>(decisions.size()) == hq, "MacOracle::step: ", decisions.size(),
          " decisions given for ", hq, " query heads");
  require(prefill_ <= m && m < layer_.tokens, "MacOracle::step: position m = ", m,
          " outside [P = ", prefill_, ", ", layer_.tokens, ")");
  require(m > last_step_, "MacOracle::step: position m = ", m, " does not follow the last step ",
          last_step_);

  // Stage 1–3: validate each decision and lay out its ranges.
  // Segments per head: 0 sink [0, Fe(E(m))), 1 mid [Fe(E(m)), E(p)) (exact only; empty on
  // a miss), 2 band, 3 tail [E(m), m].
  StepResult res;
  res.position = m;
  res.heads.resize(static_cast<size_t>(hq));
  std::vector<SegmentQuery> qs(static_cast<size_t>(hq));
  std::vector<State> prefix(static_cast<size_t>(hq), State::empty(layer_.head_dim));
  for (int64_t h = 0; h < hq; ++h) {
    const Decision& dc = decisions[h];
    HeadResult& hr = res.heads[h];
    hr.hit = dc.hit;
    if (dc.hit) {
      const int64_t p = dc.match_pos;
      require(m >= params_.gen_min, "MacOracle::step: head ", h, " at position ", m,
              ": hit although m < gen_min = ", params_.gen_min);
      require(dc.ready, "MacOracle::step: head ", h, " at position ", m,
              ": hit although not ready");
      require(std::max<int64_t>(0, m - M) <= p && p < m, "MacOracle::step: head ", h,
              " at position ", m, ": hit on position ", p, " outside the candidates [",
              std::max<int64_t>(0, m - M), ", ", m, ")");
      const State* e = entry(h, p);
      require(e != nullptr, "MacOracle::step: head ", h, " at position ", m, ": hit on position ",
              p, " whose entry the ring does not hold");
      const int64_t ep = prefix_end(p, r);
      require(!e->is_empty() && !(F > 0 && ep < F), "MacOracle::step: head ", h, " at position ", m,
              ": hit on position ", p, " whose entry is unusable (empty, or E(p) = ", ep,
              " < F = ", F, ")");
      prefix[h] = *e;  // read before write: slot m mod M may hold p = m − M
      hr.match_pos = p;
    } else {
      hr.match_pos = -1;
    }
    const StepRanges<int64_t> k = step_ranges(m, hr.match_pos, r, F);
    store_ranges(hr, k);
    // mid [Fe(E(m)), E(p)) ends where the band begins (empty on a miss).
    qs[h] = SegmentQuery{
        h / g, layer_.q_post_at(m, h), {0, k.sink_end, k.band_begin, k.band_end, k.kv_len}};
  }

  // Exact range states of every head, one engine call (K/V read once per KV head).
  const auto seg = attend_segments(layer_, scale_, qs);

  // Stages 4–5: entry, cache write, complete; exact full attention in key order.
  for (int64_t h = 0; h < hq; ++h) {
    HeadResult& hr = res.heads[h];
    const State& sink = seg[h][0];
    const State& mid = seg[h][1];
    const State& band = seg[h][2];
    const State& tail = seg[h][3];
    hr.entry = merge(prefix[h], band);
    hr.out = merge(merge(hr.entry, sink), tail);
    hr.exact = merge(merge(merge(sink, mid), band), tail);
    if (decisions[h].ready) {
      slot(h, m) = Slot{m, hr.entry};
      hr.wrote_entry = true;
    }
  }
  last_step_ = m;
  return res;
}

}  // namespace mac::oracle
