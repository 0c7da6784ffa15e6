#include "mac/ref/stepper.hpp"

#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"

#include <cmath>
#include <limits>

namespace mac::ref {

template <typename T>
Ring<T>::Ring(int64_t capacity, int64_t num_heads, int64_t head_dim)
    : capacity_(capacity), num_heads_(num_heads),
      entries_(static_cast<size_t>(capacity * num_heads)) {
  for (auto& e : entries_) e.state = AttnState<T>::empty(head_dim);
}

template <typename T>
DecodeStepper<T>::DecodeStepper(const LayerData& layer, double softmax_scale, const MacParams& params,
                                Variant variant, StateStorage storage)
    : layer_(layer), scale_(softmax_scale), params_(params), variant_(variant), storage_(storage) {
  params_.validate();
  require(supported_head_dim(layer.head_dim), "head_dim = ", layer.head_dim, " is not supported (64, 128 or 256)");
  require(layer.num_kv_heads >= 1 && layer.num_q_heads % layer.num_kv_heads == 0, "num_q_heads = ",
          layer.num_q_heads, " is not a multiple of num_kv_heads = ", layer.num_kv_heads);
  require(std::isfinite(softmax_scale) && softmax_scale > 0, "softmax_scale = ", softmax_scale,
          " must be finite and > 0");
  ring_ = Ring<T>(params_.ring, layer.num_q_heads, layer.head_dim);
  threshold_ = match_threshold(layer.head_dim, params_.tau);
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
  require(0 <= P && P <= layer_.tokens, "prefill length P = ", P, " outside [0, ", layer_.tokens, "]");
  require(last_step_ < 0, "prefill must come before the first decode step");
  const int64_t r = params_.tail, F = params_.sinks, G = layer_.group_size();
  const int64_t first = P - params_.ring > 0 ? P - params_.ring : 0;
#pragma omp parallel for schedule(dynamic)
  for (int64_t h = 0; h < layer_.num_q_heads; ++h) {
    for (int64_t p = first; p < P; ++p) {
      const int64_t e = prefix_end(p, r), fe = sink_end(F, e);
      const float* q = layer_.q_post_at(p, h);
      AttnState<T> st;
      if (mode == PrefillMode::kDirect) {
        st = attend<T>(layer_, h / G, q, scale_, fe, e);  // attn(q_p, [Fe(E(p)), E(p)))
      } else {
        // full(q_p, [0, p]) ⊖ (sinks [0, Fe) ⊕ window [E(p), p]).
        const auto full = attend<T>(layer_, h / G, q, scale_, 0, p + 1);
        const auto removed = merge(attend<T>(layer_, h / G, q, scale_, 0, fe),
                                   attend<T>(layer_, h / G, q, scale_, e, p + 1));
        st = downdate(full, removed).state;
      }
      auto& slot = ring_.slot(h, p);
      slot.pos = p;
      slot.q_pre = layer_.q_pre_at(p, h);
      slot.state = store(st);
      slot.depth = 0;
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
HeadStep<T> DecodeStepper<T>::step_head(int64_t h, int64_t m, bool ready) {
  const int64_t r = params_.tail, F = params_.sinks, G = layer_.group_size(), hk = h / G;
  const int64_t Em = prefix_end(m, r), Fem = sink_end(F, Em);
  const float* q = layer_.q_post_at(m, h);
  HeadStep<T> s;

  // 1. Eligibility.
  s.eligible = m >= params_.gen_min && ready && m >= 1;
  // 2. Match: argmin first, validity second (no second-best search).
  const RingEntry<T>* entry = nullptr;
  if (s.eligible) {
    s.match = match(h, m);
    if (s.match.below_threshold) {
      const RingEntry<T>* e = ring_.find(h, s.match.best_pos);
      const bool usable = !e->state.is_empty() && !(F > 0 && prefix_end(e->pos, r) < F);
      if (usable) entry = e;
    }
  }
  s.hit = entry != nullptr;
  // 3. Amend: the reused prefix and the band recomputed with the current query.
  if (s.hit) {
    s.match_pos = entry->pos;
    s.prefix = entry->state;
    s.band_begin = prefix_end(entry->pos, r);
    s.depth = entry->depth + 1;
  } else {
    s.prefix = AttnState<T>::empty(layer_.head_dim);
    s.band_begin = Fem;
    s.depth = 0;
  }
  s.band_end = Em;
  const auto band = attend<T>(layer_, hk, q, scale_, s.band_begin, s.band_end);
  const auto cached = merge(s.prefix, band);  // covers [Fe(E(m)), E(m))
  // 5. Complete: sinks and the always-exact tail.
  s.sink_end = Fem;
  s.tail_begin = Em;
  const auto sink = attend<T>(layer_, hk, q, scale_, 0, Fem);
  const auto tail = attend<T>(layer_, hk, q, scale_, Em, m + 1);
  s.out = merge(merge(cached, sink), tail);
  s.keys_read = (s.band_end - s.band_begin) + Fem + (m + 1 - Em);
  // 4. Cache write (only if ready); the match above already read slot m mod M.
  if (ready) {
    AttnState<T> written = cached;
    if (variant_ == Variant::kDowndate) written = downdate(s.out, merge(sink, tail)).state;
    auto& slot = ring_.slot(h, m);
    slot.pos = m;
    slot.q_pre = layer_.q_pre_at(m, h);
    slot.state = store(written);
    slot.depth = s.depth;
    s.wrote_entry = true;
  }
  return s;
}

template <typename T>
StepResult<T> DecodeStepper<T>::step(int64_t m, bool ready) {
  require(m > last_step_ && m < layer_.tokens, "decode position m = ", m, " must be in (", last_step_, ", ",
          layer_.tokens, ")");
  last_step_ = m;
  StepResult<T> res;
  res.position = m;
  res.heads.resize(static_cast<size_t>(layer_.num_q_heads));
#pragma omp parallel for schedule(dynamic)
  for (int64_t h = 0; h < layer_.num_q_heads; ++h) res.heads[static_cast<size_t>(h)] = step_head(h, m, ready);
  return res;
}

template class Ring<float>;
template class Ring<double>;
template class DecodeStepper<float>;
template class DecodeStepper<double>;

}  // namespace mac::ref
