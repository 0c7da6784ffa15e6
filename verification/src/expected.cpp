#include "mac/verify/expected.hpp"

#include "mac/ref/bf16.hpp"
#include "mac/ref/match.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::verify {

using oracle::State;

Expected::Expected(const CaseInputs& in, StateStorage storage) : in_(in), storage_(storage) {
  const int64_t M = in.params.ring;
  const int Hq = in.spec.Hq();
  rings_.resize(in.requests.size());
  slots_.resize(in.requests.size());
  gate_ = make_gate_config(in.params, Hq, in.spec.Hkv, in.spec.D);
  gate_states_.assign(in.requests.size(), GateState{});
  gate_modes_.assign(in.requests.size(), GateMode::kNone);
  for (size_t i = 0; i < in.requests.size(); ++i) {
    // min(M, T) slots, as the oracle and the stepper keep: request i only ever holds positions
    // p < T = P + steps, and for those slot p mod min(M, T) is slot p mod M (M ≥ T never
    // wraps). A case may declare any M up to kMaxTokens without a ring of that size.
    const int64_t P = in.requests[i].prompt, T = P + in.spec.steps;
    slots_[i] = std::min(M, T);
    rings_[i].resize(static_cast<size_t>(Hq * slots_[i]));
    for (int64_t p = P - M > 0 ? P - M : 0; p < P; ++p)
      for (int h = 0; h < Hq; ++h) slot(static_cast<int>(i), h, p).pos = p;
  }
}

oracle::State Expected::store(const oracle::State& st) const {
  if (storage_ == StateStorage::kFull || st.is_empty()) return st;
  oracle::State r;
  r.o = st.o.unaryExpr(
      [](double x) { return static_cast<double>(ref::round_bf16(static_cast<float>(x))); });
  r.lse = static_cast<double>(static_cast<float>(st.lse));
  return r;
}

std::vector<std::vector<ExpectedHead>> Expected::step(int64_t s) {
  std::vector<std::vector<ExpectedHead>> out(in_.requests.size());
  for (size_t i = 0; i < in_.requests.size(); ++i)
    out[i] = step_request(static_cast<int>(i), in_.requests[i].prompt + s);
  return out;
}

namespace {
/*! Exact squared distance of two BF16-exact vectors in FP64 (products exact, sums rounded
 *  at 2^-53): a vectorisable pre-filter for the canonical FP32 distance. */
inline double d2_exactish(const float* a, const float* b, int D) {
  double s = 0;
  for (int d = 0; d < D; ++d) {
    const double x = static_cast<double>(a[d]) - static_cast<double>(b[d]);
    s += x * x;
  }
  return s;
}
}  // namespace

void Expected::match_head(int i, int h, int64_t m, bool gated, ExpectedHead* out) const {
  const auto& rq = in_.requests[static_cast<size_t>(i)];
  const auto& L = rq.layer;
  const auto& par = in_.params;
  const int D = in_.spec.D;
  const int64_t M = par.ring, r = par.tail, F = par.sinks;
  const float thr = match_threshold(D, par.tau);
  auto slot = [&](int64_t p) -> const Slot& { return this->slot(i, h, p); };
  auto& e = *out;
  e.position = m;
  e.d2 = std::numeric_limits<float>::quiet_NaN();
  e.margin = std::numeric_limits<double>::quiet_NaN();
  e.eligible = m >= par.gen_min && rq.ready && m >= 1;
  if (!e.eligible) return;
  if (gated) {
    e.policy = 3;
    return;
  }
  const float* q = L.q_pre_at(m, h);
  const int64_t first = m - M > 0 ? m - M : 0;
  // Pre-filter: the canonical FP32 distance is within a relative 2^-24·D/8·few ≪ 1e-3 of
  // the exact one (inputs are finite BF16), so the canonical argmin lies among the
  // candidates whose FP64 distance is within 1e-3 (relative) of the FP64 minimum; only
  // those get the canonical evaluation, in ascending p.
  std::vector<double> ex(static_cast<size_t>(m - first), std::numeric_limits<double>::infinity());
  double best_ex = std::numeric_limits<double>::infinity();
  bool any_nan = false;
  for (int64_t p = first; p < m; ++p) {
    if (slot(p).pos != p) continue;
    const double d = d2_exactish(q, L.q_pre_at(p, h), D);
    if (std::isnan(d)) any_nan = true;
    ex[static_cast<size_t>(p - first)] = d;
    best_ex = std::min(best_ex, d);
  }
  const double cut = best_ex * (1.0 + 1e-3) + std::numeric_limits<double>::min();
  bool have = false;
  for (int64_t p = first; p < m; ++p) {
    if (slot(p).pos != p) continue;
    if (!any_nan && !(ex[static_cast<size_t>(p - first)] <= cut)) continue;
    const float d2 = ref::canonical_d2(q, L.q_pre_at(p, h), D);
    // argmin (d2, p): ascending p with strict '<' sends ties to the older position;
    // a NaN never displaces a number.
    if (!have || d2 < e.d2 || (std::isnan(e.d2) && !std::isnan(d2))) {
      have = true;
      e.best_pos = p;
      e.d2 = d2;
    }
  }
  if (!have) return;
  e.margin = static_cast<double>(thr) - ref::d2_fp64(q, L.q_pre_at(e.best_pos, h), D);
  const Slot& sl = slot(e.best_pos);
  // Usable iff its range [Fe(E(p)), E(p)) is not empty (L finite), i.e. E(p) > F.
  const bool usable = prefix_end(e.best_pos, r) > F && !(sl.evaluated && sl.state.is_empty());
  e.hit = e.d2 < thr && usable;
  // Policies (semantics §3.3): refresh first, then the depth cap, each a plain miss.
  if (e.hit && refresh_due<int64_t>(m, h, in_.spec.Hq(), par.refresh)) {
    e.hit = false;
    e.policy = 1;
  } else if (e.hit && depth_capped<int64_t>(sl.depth, par.depth_cap)) {
    e.hit = false;
    e.policy = 2;
  }
  if (e.hit) e.match_pos = e.best_pos;
  e.depth = e.hit ? sl.depth + 1 : 0;
}

std::vector<ExpectedHead> Expected::step_request(int i, int64_t m) {
  const auto& rq = in_.requests[static_cast<size_t>(i)];
  const auto& L = rq.layer;
  const auto& par = in_.params;
  const int Hq = in_.spec.Hq(), G = in_.spec.G, D = in_.spec.D;
  const int64_t r = par.tail, F = par.sinks;
  auto slot = [&](int h, int64_t p) -> Slot& { return this->slot(i, h, p); };

  std::vector<ExpectedHead> heads(static_cast<size_t>(Hq));
  std::vector<oracle::SegmentQuery> queries;
  std::vector<int> lazy_of(static_cast<size_t>(Hq),
                           -1);  // query index of a lazily evaluated prefix
  // The gate (§3.5) decides from the state the earlier steps left; an ineligible step is
  // kNone and leaves it alone.
  GateState& gst = gate_states_[static_cast<size_t>(i)];
  const bool eligible = m >= par.gen_min && rq.ready && m >= 1;
  const GateMode mode = eligible ? mac::gate_mode(gate_, gst, m) : GateMode::kNone;
  gate_modes_[static_cast<size_t>(i)] = mode;
  const bool gated = gate_gated(mode);
  // 1–2. Eligibility and match (all heads read the ring before any write).
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < Hq; ++h) match_head(i, h, m, gated, &heads[static_cast<size_t>(h)]);
  for (int h = 0; h < Hq; ++h) {
    auto& e = heads[static_cast<size_t>(h)];
    oracle::SegmentQuery sq;
    sq.kv_head = h / G;
    sq.q = L.q_post_at(m, h);
    // Sinks [0, Fe(E(m))), on a hit the part of the prefix the ring holds [Fe(E(m)), E(p)),
    // band [E(p) or Fe(E(m)), E(m)), tail [E(m), m]: the ranges of mac::step_ranges.
    const auto k = step_ranges(m, e.hit ? e.match_pos : -1, r, F);
    if (e.hit)
      sq.cuts = {0, k.sink_end, k.band_begin, k.band_end, k.kv_len};
    else
      sq.cuts = {0, k.sink_end, k.band_end, k.kv_len};
    e.keys_read = k.keys_read();
    queries.push_back(std::move(sq));
  }
  for (int h = 0; h < Hq; ++h) {
    const auto& e = heads[static_cast<size_t>(h)];
    if (!e.hit || slot(h, e.match_pos).evaluated) continue;
    const int64_t Ep = prefix_end(e.match_pos, r);
    oracle::SegmentQuery sq;
    sq.kv_head = h / G;
    sq.q = L.q_post_at(e.match_pos, h);
    sq.cuts = {sink_end(F, Ep), Ep};
    lazy_of[static_cast<size_t>(h)] = static_cast<int>(queries.size());
    queries.push_back(std::move(sq));
  }
  const auto seg = oracle::attend_segments(L, in_.scale, queries);

  // The byte model of the step (§3.5): each KV group reads [0, Fe(E(m))) and [lo, m], lo its
  // heads' smallest band start (E(p) on a hit, Fe(E(m)) on a miss).
  {
    int64_t hits = 0, group_keys = 0;
    for (int hk = 0; hk < in_.spec.Hkv; ++hk) {
      int64_t lo = m + 1, fe = 0;
      for (int h = hk * G; h < (hk + 1) * G; ++h) {
        const auto& e = heads[static_cast<size_t>(h)];
        const auto k = step_ranges(m, e.hit ? e.match_pos : -1, r, F);
        lo = std::min(lo, k.band_begin);
        fe = k.sink_end;
        hits += e.hit;
      }
      group_keys += gate_group_keys(m, fe, lo);
    }
    const int64_t full = gate_full_bytes(gate_, m);
    const int64_t bytes = gate_step_bytes(gate_, m, eligible && !gated, rq.ready, group_keys);
    gate_update(gate_, gst, mode, hits, bytes, full);
  }

  // 3–5. Amend, complete, cache write.
  for (int h = 0; h < Hq; ++h) {
    auto& e = heads[static_cast<size_t>(h)];
    const auto& sg = seg[static_cast<size_t>(h)];
    State prefix = State::empty(D), band, mid = State::empty(D);
    const State& sink = sg[0];
    if (e.hit) {
      Slot& sl = slot(h, e.match_pos);
      if (!sl.evaluated) {
        sl.state = store(seg[static_cast<size_t>(lazy_of[static_cast<size_t>(h)])][0]);
        sl.evaluated = true;
      }
      prefix = sl.state;
      mid = sg[1];
      band = sg[2];
    } else {
      band = sg[1];
    }
    const State& tail = sg.back();
    e.entry = ref::merge(prefix, band);
    e.out = ref::merge(ref::merge(e.entry, sink), tail);
    e.exact = ref::merge(ref::merge(ref::merge(sink, mid), band), tail);
  }
  if (rq.ready) {
    for (int h = 0; h < Hq; ++h) {
      auto& e = heads[static_cast<size_t>(h)];
      Slot& sl = slot(h, m);
      sl.pos = m;
      sl.evaluated = true;
      sl.state = store(e.entry);
      sl.depth = e.depth;
      e.wrote_entry = true;
    }
  }
  return heads;
}

}  // namespace mac::verify
