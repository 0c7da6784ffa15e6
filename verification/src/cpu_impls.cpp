// CPU implementations under test: the FP32 reference stepper and the FP64 fault model.
#include "mac/ref/attention.hpp"
#include "mac/ref/match.hpp"
#include "mac/ref/stepper.hpp"
#include "mac/verify/impl.hpp"

#include <cmath>
#include <limits>

namespace mac::verify {
namespace {

template <typename T>
std::vector<double> to_vec(const ref::Vec<T>& v) {
  std::vector<double> o(static_cast<size_t>(v.size()));
  for (Eigen::Index d = 0; d < v.size(); ++d) o[static_cast<size_t>(d)] = static_cast<double>(v[d]);
  return o;
}

// ---------------------------------------------------------------------------------------
class ReferenceImpl final : public Implementation {
 public:
  explicit ReferenceImpl(StateStorage st) : storage_(st) {}
  std::string name() const override {
    return storage_ == StateStorage::kFull ? "reference-fp32" : "reference-fp32/production-storage";
  }
  std::string device() const override { return "cpu"; }
  void begin(const CaseInputs& in) override {
    in_ = &in;
    steppers_.clear();
    for (const auto& rq : in.requests) {
      steppers_.push_back(std::make_unique<ref::DecodeStepper<float>>(rq.layer, in.scale, in.params,
                                                                      Variant::kSplit, storage_));
      steppers_.back()->prefill(rq.prompt);
    }
  }
  void step(int64_t s, StepOutput* out) override {
    out->assign(in_->requests.size(), {});
    for (size_t i = 0; i < in_->requests.size(); ++i) {
      const auto& rq = in_->requests[i];
      const int64_t m = rq.prompt + s;
      const auto res = steppers_[i]->step(m, rq.ready);
      auto& row = (*out)[i];
      row.resize(res.heads.size());
      for (size_t h = 0; h < res.heads.size(); ++h) {
        const auto& hs = res.heads[h];
        auto& o = row[h];
        o.hit = hs.hit;
        o.match_pos = hs.match_pos;
        o.keys_read = hs.keys_read;
        o.o = to_vec(hs.out.o);
        o.lse = hs.out.lse;
        const auto* e = steppers_[i]->ring().find(static_cast<int64_t>(h), m);
        o.entry_valid = true;
        o.entry_written = e != nullptr;
        if (e) {
          o.entry_q_exact = e->q_pre == rq.layer.q_pre_at(m, static_cast<int64_t>(h));
          o.entry_o = to_vec(e->state.o);
          o.entry_lse = e->state.lse;
          o.entry_depth = e->depth;
        }
      }
    }
  }
  bool gate_state(int i, std::array<int64_t, 5>* out) const override {
    if (in_->params.gate_window == 0) return false;
    *out = gate_state_row(steppers_[static_cast<size_t>(i)]->gate_state());
    return true;
  }

 private:
  StateStorage storage_;
  const CaseInputs* in_ = nullptr;
  std::vector<std::unique_ptr<ref::DecodeStepper<float>>> steppers_;
};

// ---------------------------------------------------------------------------------------
/*! An independent FP64 implementation of docs/semantics.md §3 with one switchable fault. */
class ModelImpl final : public Implementation {
 public:
  explicit ModelImpl(Fault f) : fault_(f) {}
  std::string name() const override { return std::string("model-fp64/") + to_string(fault_); }
  std::string device() const override { return "cpu"; }
  bool supports(const CaseSpec& c, std::string* why) const override {
    if (!c.has_gate()) return true;
    *why = msg("gate window W = ", c.W, " but the FP64 model does not implement the gate (§3.5)");
    return false;
  }

  void begin(const CaseInputs& in) override {
    in_ = &in;
    const int64_t M = in.params.ring;
    rings_.assign(in.requests.size(), {});
    for (size_t i = 0; i < in.requests.size(); ++i) {
      rings_[i].assign(static_cast<size_t>(in.spec.Hq() * M), Slot{});
      const int64_t P = in.requests[i].prompt;
      for (int64_t p = P - M > 0 ? P - M : 0; p < P; ++p)
        for (int h = 0; h < in.spec.Hq(); ++h)
          rings_[i][static_cast<size_t>(h * M + p % M)].pos = p;
    }
  }

  void step(int64_t s, StepOutput* out) override {
    out->assign(in_->requests.size(), {});
    for (size_t i = 0; i < in_->requests.size(); ++i)
      step_request(i, in_->requests[i].prompt + s, &(*out)[i]);
  }

 private:
  struct Slot {
    int64_t pos = -1;
    bool evaluated = false;
    int64_t depth = 0;  // chain depth; prompt entries 0
    ref::AttnState<double> state;
  };
  using S = ref::AttnState<double>;

  void step_request(size_t i, int64_t m, std::vector<HeadOutput>* row) {
    const auto& rq = in_->requests[i];
    const auto& L = rq.layer;
    const auto& par = in_->params;
    const int Hq = in_->spec.Hq(), G = in_->spec.G, D = in_->spec.D;
    const int64_t M = par.ring, r = par.tail, F = par.sinks;
    const int64_t Em = prefix_end(m, r), Fem = sink_end(F, Em);
    const float thr = match_threshold(D, par.tau);
    const double sc = in_->scale;
    auto& ring = rings_[i];
    auto slot = [&](int h, int64_t p) -> Slot& { return ring[static_cast<size_t>(h * M + p % M)]; };
    const bool ready = rq.ready || fault_ == Fault::kNoReadyGate;
    const bool eligible =
        (fault_ == Fault::kGenMinOffByOne ? m > par.gen_min : m >= par.gen_min) && ready && m >= 1;
    auto entry_state = [&](int h, int64_t p) -> const S& {
      Slot& sl = slot(h, p);
      if (!sl.evaluated) {
        const int64_t Ep = prefix_end(p, r);
        sl.state = ref::attend<double>(L, h / G, L.q_post_at(p, h), sc, sink_end(F, Ep), Ep);
        sl.evaluated = true;
      }
      return sl.state;
    };
    auto usable = [&](int h, int64_t p) {
      const int64_t Ep = prefix_end(p, r);
      return Ep > sink_end(F, Ep) && !(F > 0 && Ep < F) && !entry_state(h, p).is_empty();
    };
    if (fault_ == Fault::kWriteBeforeRead && ready)
      for (int h = 0; h < Hq; ++h) slot(h, m).pos = m;  // clobbers candidate m − M

    row->resize(static_cast<size_t>(Hq));
    std::vector<int64_t> match(static_cast<size_t>(Hq), -1), forced(match);
    for (int h = 0; h < Hq; ++h) {
      if (!eligible) continue;
      const float* q = L.q_pre_at(m, h);
      int64_t best = -1;
      float bd = std::numeric_limits<float>::quiet_NaN();
      for (int64_t p = m - M > 0 ? m - M : 0; p < m; ++p) {
        if (slot(h, p).pos != p) continue;
        if (fault_ == Fault::kSecondBest && !usable(h, p)) continue;
        const float d2 = ref::canonical_d2(q, L.q_pre_at(p, h), D);
        const bool better = fault_ == Fault::kTieNewer ? d2 <= bd : d2 < bd;
        if (best < 0 || better || (std::isnan(bd) && !std::isnan(d2))) {
          best = p;
          bd = d2;
        }
      }
      const bool below = fault_ == Fault::kThresholdInclusive ? bd <= thr : bd < thr;
      if (!(best >= 0 && below && usable(h, best))) continue;
      // Policies (semantics §3.3) turn the would-be hit into a miss.
      const bool refresh = fault_ == Fault::kRefreshAllHeads
                               ? par.refresh > 0 && m % par.refresh == 0
                               : refresh_due<int64_t>(m, h, Hq, par.refresh);
      const int64_t cap = par.depth_cap;
      const bool capped = fault_ == Fault::kCapOffByOne
                              ? cap >= 0 && slot(h, best).depth > cap
                              : depth_capped<int64_t>(slot(h, best).depth, cap);
      if (refresh || capped) {
        forced[static_cast<size_t>(h)] = best;
        continue;
      }
      match[static_cast<size_t>(h)] = best;
    }
    for (int h = 0; h < Hq; ++h) {
      auto& o = (*row)[static_cast<size_t>(h)];
      const int64_t p = match[static_cast<size_t>(h)];
      const float* q = L.q_post_at(m, h);
      const int hk = h / G;
      S prefix = S::empty(D);
      int64_t b0 = Fem;
      if (p >= 0) {
        prefix = entry_state(h, p);
        b0 = prefix_end(p, r) + (fault_ == Fault::kBandLate ? 1 : 0);
        if (b0 > Em) b0 = Em;
      }
      const S band = ref::attend<double>(L, hk, q, sc, b0, Em);
      const S cached = ref::merge(prefix, band);
      const S sink = ref::attend<double>(L, hk, q, sc, 0, Fem);
      const S tail = ref::attend<double>(L, hk, q, sc, Em, fault_ == Fault::kTailShort ? m : m + 1);
      const S res = ref::merge(ref::merge(cached, sink), tail);
      o.hit = p >= 0;
      o.match_pos = p;
      o.keys_read = p >= 0 ? (Em - prefix_end(p, r)) + Fem + (m + 1 - Em) : m + 1;
      o.o = to_vec(res.o);
      o.lse = res.lse;
      o.entry_valid = true;
      if (ready) {
        S written = cached;
        if (fault_ == Fault::kDowndateEntry) {
          const auto f32 = ref::downdate(res.cast<float>(), ref::merge(sink, tail).cast<float>());
          written = f32.state.cast<double>();
        }
        // Depth of entry(m): read from the matched slot before this write replaces it.
        const int64_t f = forced[static_cast<size_t>(h)];
        int64_t depth = p >= 0 ? slot(h, p).depth + 1 : 0;
        if (f >= 0 && fault_ == Fault::kForcedMissChains) depth = slot(h, f).depth + 1;
        Slot& sl = slot(h, m);
        sl.pos = m;
        sl.evaluated = true;
        sl.state = written;
        sl.depth = depth;
        o.entry_written = true;
        o.entry_o = to_vec(written.o);
        o.entry_lse = written.lse;
        o.entry_depth = depth;
      }
    }
  }

  Fault fault_;
  const CaseInputs* in_ = nullptr;
  std::vector<std::vector<Slot>> rings_;
};

}  // namespace

std::unique_ptr<Implementation> make_reference_impl(StateStorage st) {
  return std::make_unique<ReferenceImpl>(st);
}
std::unique_ptr<Implementation> make_model_impl(Fault f) { return std::make_unique<ModelImpl>(f); }

const char* to_string(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kTieNewer: return "tie-newer";
    case Fault::kBandLate: return "band-late";
    case Fault::kThresholdInclusive: return "threshold-inclusive";
    case Fault::kWriteBeforeRead: return "write-before-read";
    case Fault::kNoReadyGate: return "no-ready-gate";
    case Fault::kSecondBest: return "second-best";
    case Fault::kTailShort: return "tail-short";
    case Fault::kDowndateEntry: return "downdate-entry";
    case Fault::kGenMinOffByOne: return "gen-min-off-by-one";
    case Fault::kCapOffByOne: return "cap-off-by-one";
    case Fault::kRefreshAllHeads: return "refresh-all-heads";
    case Fault::kForcedMissChains: return "forced-miss-chains";
  }
  return "?";
}

std::vector<Fault> all_faults() {
  return {Fault::kTieNewer,        Fault::kBandLate,        Fault::kThresholdInclusive,
          Fault::kWriteBeforeRead, Fault::kNoReadyGate,     Fault::kSecondBest,
          Fault::kTailShort,       Fault::kDowndateEntry,   Fault::kGenMinOffByOne,
          Fault::kCapOffByOne,     Fault::kRefreshAllHeads, Fault::kForcedMissChains};
}

Fault parse_fault(const std::string& s) {
  if (s == "none") return Fault::kNone;
  for (Fault f : all_faults())
    if (s == to_string(f)) return f;
  throw InputError(
      msg("fault = '", s, "' is unknown (none, tie-newer, band-late, threshold-inclusive, ",
          "write-before-read, no-ready-gate, second-best, tail-short, downdate-entry, ",
          "gen-min-off-by-one, cap-off-by-one, refresh-all-heads, forced-miss-chains)"));
}

}  // namespace mac::verify
