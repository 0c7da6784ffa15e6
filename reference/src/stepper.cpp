#include "mac/ref/stepper.hpp"

#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::ref {

template <typename T>
Ring<T>::Ring(int64_t capacity, int64_t num_heads, int64_t head_dim)
    : capacity_(capacity),
      num_heads_(num_heads),
      entries_(static_cast<size_t>(checked_product("ring [Hq, slots]", {num_heads, capacity}))) {
  for (auto& e : entries_) e.state = AttnState<T>::empty(head_dim);
}

template <typename T>
DecodeStepper<T>::DecodeStepper(const LayerData& layer, double softmax_scale,
                                const MacParams& params, Variant variant, StateStorage storage)
    : layer_(layer), scale_(softmax_scale), params_(params), variant_(variant), storage_(storage) {
  params_.validate();
  require(supported_head_dim(layer.head_dim), "head_dim = ", layer.head_dim,
          " is not supported (64, 128 or 256)");
  require(layer.num_kv_heads >= 1 && layer.num_q_heads % layer.num_kv_heads == 0,
          "num_q_heads = ", layer.num_q_heads,
          " is not a multiple of num_kv_heads = ", layer.num_kv_heads);
  require(std::isfinite(softmax_scale) && softmax_scale > 0, "softmax_scale = ", softmax_scale,
          " must be finite and > 0");
  layer.check_logit_range(softmax_scale, "layer");
  // Positions are < T (the layer's capacity: an incremental layer fills its positions after
  // this), so a ring of M ≥ T never wraps and its slot p mod M is slot p mod T: min(M, T)
  // slots per head hold the same entries (M itself may be as large as kMaxTokens).
  const int64_t positions = std::max<int64_t>({layer.tokens, layer.capacity(), 1});
  ring_ = Ring<T>(std::min(params_.ring, positions), layer.num_q_heads, layer.head_dim);
  threshold_ = match_threshold(layer.head_dim, params_.tau);
  gate_ = make_gate_config(params_, layer.num_q_heads, layer.num_kv_heads, layer.head_dim);
  check_gate_config(gate_, positions - 1);
}

template <typename T>
AttnState<T> DecodeStepper<T>::store(const AttnState<T>& s) const {
  if (storage_ == StateStorage::kFull || s.is_empty()) return s;
  AttnState<T> r;
  r.o = s.o.unaryExpr([](T x) { return static_cast<T>(round_bf16(static_cast<float>(x))); });
  r.lse = static_cast<T>(static_cast<float>(s.lse));
  return r;
}

template <typename T>
void DecodeStepper<T>::prefill(int64_t P, PrefillMode mode) {
  require(0 <= P && P <= layer_.tokens, "prefill length P = ", P, " outside [0, ", layer_.tokens,
          "]");
  require(last_step_ < 0, "prefill must come before the first decode step");
  const int64_t r = params_.tail, F = params_.sinks, G = layer_.group_size();
  const int64_t first = P - params_.ring > 0 ? P - params_.ring : 0;
  // Work units: (KV head, chunk of positions); the G heads of a group and the positions of
  // a chunk share every K/V block read (attend_many).
  constexpr int64_t kChunk = 32;
  const int64_t chunks = (P - first + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic) collapse(2)
  for (int64_t hk = 0; hk < layer_.num_kv_heads; ++hk) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t p0 = first + c * kChunk, p1 = std::min(P, p0 + kChunk);
      std::vector<RangeQuery> qs;
      for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t e = prefix_end(p, r), fe = sink_end(F, e);
          const float* q = layer_.q_post_at(p, h);
          if (mode == PrefillMode::kDirect) {
            qs.push_back({q, fe, e});  // attn(q_p, [Fe(E(p)), E(p)))
          } else {
            // full(q_p, [0, p]) ⊖ (sinks [0, Fe) ⊕ window [E(p), p]).
            qs.push_back({q, 0, p + 1});
            qs.push_back({q, 0, fe});
            qs.push_back({q, e, p + 1});
          }
        }
      const auto states = attend_many<T>(layer_, hk, scale_, qs);
      size_t i = 0;
      for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
        for (int64_t p = p0; p < p1; ++p) {
          AttnState<T> st;
          if (mode == PrefillMode::kDirect) {
            st = states[i++];
          } else {
            st = downdate(states[i], merge(states[i + 1], states[i + 2])).state;
            i += 3;
          }
          auto& slot = ring_.slot(h, p);
          slot.pos = p;
          slot.q_pre = layer_.q_pre_at(p, h);
          slot.state = store(st);
          slot.depth = 0;
        }
    }
  }
  last_step_ = P - 1;
}

template <typename T>
MatchResult DecodeStepper<T>::match(int64_t h, int64_t m) const {
  MatchResult r;
  r.threshold = threshold_;
  r.d2 = std::numeric_limits<float>::quiet_NaN();
  r.d2_fp64 = std::numeric_limits<double>::quiet_NaN();
  const int64_t D = layer_.head_dim;
  const float* q = layer_.q_pre_at(m, h);
  const int64_t first = m - params_.ring > 0 ? m - params_.ring : 0;
  // argmin over (d2, p): ascending p and a strict '<' give ties to the older position;
  // a NaN distance never displaces a number.
  for (int64_t p = first; p < m; ++p) {
    const RingEntry<T>* e = ring_.find(h, p);
    if (e == nullptr) continue;
    const float d2 = canonical_d2(q, e->q_pre, D);
    if (!r.has_candidate || d2 < r.d2 || (std::isnan(r.d2) && !std::isnan(d2))) {
      r.has_candidate = true;
      r.best_pos = p;
      r.d2 = d2;
    }
  }
  if (r.has_candidate) {
    r.d2_fp64 = d2_fp64(q, layer_.q_pre_at(r.best_pos, h), D);
    r.margin = static_cast<double>(threshold_) - r.d2_fp64;
    r.below_threshold = r.d2 < threshold_;  // strict; NaN is never below
  }
  return r;
}

template <typename T>
void DecodeStepper<T>::decide(int64_t h, int64_t m, bool ready, bool gated, HeadStep<T>& s) const {
  const int64_t r = params_.tail, F = params_.sinks;
  // 1. Eligibility.
  s.eligible = m >= params_.gen_min && ready && m >= 1;
  // 2. Match: argmin first, validity second (no second-best search). A gated step does not
  // match: every head is a miss of §3 (§3.5).
  const RingEntry<T>* entry = nullptr;
  if (s.eligible && gated) s.policy = PolicyMiss::kGated;
  if (s.eligible && !gated) {
    s.match = match(h, m);
    if (s.match.below_threshold) {
      const RingEntry<T>* e = ring_.find(h, s.match.best_pos);
      const bool usable = !e->state.is_empty() && !(F > 0 && prefix_end(e->pos, r) < F);
      // Policies (§3.3) turn the would-be hit into a plain miss; refresh is checked first.
      if (usable && refresh_due(m, h, layer_.num_q_heads, params_.refresh))
        s.policy = PolicyMiss::kRefresh;
      else if (usable && depth_capped(e->depth, params_.depth_cap))
        s.policy = PolicyMiss::kDepthCap;
      else if (usable)
        entry = e;
    }
  }
  s.hit = entry != nullptr;
  s.match_pos = s.hit ? entry->pos : -1;
  s.prefix = s.hit ? entry->state : AttnState<T>::empty(layer_.head_dim);
  s.depth = s.hit ? entry->depth + 1 : 0;
  // 3 and 5 (ranges): band [E(p), E(m)) on a hit, [Fe(E(m)), E(m)) on a miss; sinks
  // [0, Fe(E(m))), tail [E(m), m].
  const StepRanges<int64_t> k = step_ranges(m, s.match_pos, r, F);
  store_ranges(s, k);
}

template <typename T>
StepResult<T> DecodeStepper<T>::step(int64_t m, bool ready) {
  require(m > last_step_ && m < layer_.tokens, "decode position m = ", m, " must be in (",
          last_step_, ", ", layer_.tokens, ")");
  last_step_ = m;
  const int64_t Hq = layer_.num_q_heads, G = layer_.group_size();
  StepResult<T> res;
  res.position = m;
  res.heads.resize(static_cast<size_t>(Hq));
  std::vector<AttnState<T>> band(static_cast<size_t>(Hq)), sink(band), tail(band);

  // The gate (§3.5) decides from the state the earlier steps left; an ineligible step is
  // kNone and leaves it alone.
  const bool eligible = m >= params_.gen_min && ready && m >= 1;
  const GateMode mode = eligible ? gate_mode(gate_, gate_state_, m) : GateMode::kNone;
  const bool gated = gate_gated(mode);

  // Stages 1–3 per head: eligibility, match, and the ranges to recompute.
#pragma omp parallel for schedule(dynamic)
  for (int64_t h = 0; h < Hq; ++h) decide(h, m, ready, gated, res.heads[static_cast<size_t>(h)]);

  // The byte model of the step (§3.5): the keys each KV group reads are the union of its heads'
  // ranges, [0, Fe(E(m))) and [lo, m] with lo the group's smallest band start.
  GateStep& gs = res.gate;
  gs.mode = mode;
  for (int64_t hk = 0; hk < layer_.num_kv_heads; ++hk) {
    int64_t lo = m + 1;
    for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
      const auto& s = res.heads[static_cast<size_t>(h)];
      lo = std::min(lo, s.band_begin);
      gs.hits += s.hit;
    }
    gs.group_keys += gate_group_keys(m, res.heads[static_cast<size_t>(hk * G)].sink_end, lo);
  }
  gs.bytes_full = gate_full_bytes(gate_, m);
  gs.bytes = gate_step_bytes(gate_, m, eligible && !gated, ready, gs.group_keys);
  gate_update(gate_, gate_state_, mode, gs.hits, gs.bytes, gs.bytes_full);
  gs.state = gate_state_;

  // Band, sink and tail attention with the current post-RoPE queries, per KV head: the
  // group's heads share each K/V block read.
#pragma omp parallel for schedule(dynamic)
  for (int64_t hk = 0; hk < layer_.num_kv_heads; ++hk) {
    std::vector<RangeQuery> qs;
    for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
      const auto& s = res.heads[static_cast<size_t>(h)];
      const float* q = layer_.q_post_at(m, h);
      qs.push_back({q, s.band_begin, s.band_end});
      qs.push_back({q, 0, s.sink_end});
      qs.push_back({q, s.tail_begin, m + 1});
    }
    const auto states = attend_many<T>(layer_, hk, scale_, qs);
    for (int64_t i = 0; i < G; ++i) {
      const auto h = static_cast<size_t>(hk * G + i);
      band[h] = states[static_cast<size_t>(3 * i)];
      sink[h] = states[static_cast<size_t>(3 * i + 1)];
      tail[h] = states[static_cast<size_t>(3 * i + 2)];
    }
  }

  // Merge, then stage 4, the cache write (the match above already read slot m mod M).
#pragma omp parallel for schedule(dynamic)
  for (int64_t h = 0; h < Hq; ++h) {
    auto& s = res.heads[static_cast<size_t>(h)];
    const auto hh = static_cast<size_t>(h);
    const auto cached = merge(s.prefix, band[hh]);  // covers [Fe(E(m)), E(m))
    s.out = merge(merge(cached, sink[hh]), tail[hh]);
    if (ready) {
      const AttnState<T> written = variant_ == Variant::kDowndate
                                       ? downdate(s.out, merge(sink[hh], tail[hh])).state
                                       : cached;
      auto& slot = ring_.slot(h, m);
      slot.pos = m;
      slot.q_pre = layer_.q_pre_at(m, h);
      slot.state = store(written);
      slot.depth = s.depth;
      s.wrote_entry = true;
      s.entry = slot.state;
    } else {
      s.entry = AttnState<T>::empty(layer_.head_dim);
    }
    s.band = std::move(band[hh]);
    s.sink = std::move(sink[hh]);
    s.tail = std::move(tail[hh]);
  }
  return res;
}

template class Ring<float>;
template class Ring<double>;
template class DecodeStepper<float>;
template class DecodeStepper<double>;

}  // namespace mac::ref
