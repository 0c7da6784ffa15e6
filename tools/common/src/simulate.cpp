#include "mac/tools/simulate.hpp"

#include "mac/oracle/oracle.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/stepper.hpp"
#include "mac/tools/progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>

namespace mac::tools {

void SimConfig::validate(const ref::LayerData& layer) const {
  params.validate();
  require(prefill >= 1 && prefill < layer.tokens, "prefill P = ", prefill, " must be in [1, ",
          layer.tokens - 1, "] (the layer has ", layer.tokens, " tokens)");
  require(steps >= 0 && prefill + steps <= layer.tokens, "steps = ", steps, " with prefill ",
          prefill, " runs past the layer's ", layer.tokens, " tokens");
}

int64_t SimConfig::num_steps(const ref::LayerData& layer) const {
  return steps > 0 ? steps : layer.tokens - prefill;
}

std::vector<std::string> config_warnings(const ref::LayerData& layer, const SimConfig& cfg) {
  cfg.validate(layer);
  const auto& p = cfg.params;
  const int64_t T = layer.tokens, last = cfg.prefill + cfg.num_steps(layer) - 1;
  std::vector<std::string> w;
  if (p.gen_min > last)
    w.push_back(msg("gen_min = ", p.gen_min, " is past the last decode step m = ", last,
                    " (the trace has ", T, " tokens): no step may reuse, every step is a miss"));
  if (p.tail >= last + 1)
    w.push_back(msg("tail r = ", p.tail, " holds every key of every decode step (the last has ",
                    last + 1, "): E(m) = 0, every entry is empty and nothing is reused"));
  else if (last - 1 < p.tail + p.sinks)
    // entry(p) covers [Fe(E(p)), E(p)) and is usable iff E(p) > F, i.e. p ≥ r + F.
    w.push_back(
        msg("no usable entry: entry(p) is non-empty only from p = r + F = ", p.tail + p.sinks,
            ", past the last candidate p = ", last - 1, ": nothing is reused"));
  return w;
}

std::vector<std::string> run_warnings(const SimSummary& s, const SimConfig& cfg) {
  std::vector<std::string> w;
  if (s.hits == 0 && s.unusable_matches > 0)
    w.push_back(msg("no usable entry was matched: ", s.unusable_matches,
                    " head-steps found a candidate below the threshold, every one on an empty "
                    "entry (p < r + F = ",
                    cfg.params.tail + cfg.params.sinks, ")"));
  return w;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<size_t>(std::floor(pos));
  const size_t j = std::min(i + 1, v.size() - 1);
  return v[i] + (pos - static_cast<double>(i)) * (v[j] - v[i]);
}

namespace {

double rel_l2(const ref::Vec<double>& a, const ref::Vec<double>& b) {
  const double n = b.norm();
  return n > 0 ? (a - b).norm() / n : (a - b).norm();
}

/*! \brief splitmix64 finaliser: a well-mixed 64-bit value of (seed, m, h) for the draw. */
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/*! \brief The random-entry baseline's pick for head h before step m: a position drawn
 *  uniformly from the ring's usable entries (held, L finite, E(p) ≥ F when F > 0), and a
 *  copy of its state (the step about to run overwrites slot m mod M). */
template <typename T>
std::pair<int64_t, ref::AttnState<double>> random_entry(const ref::DecodeStepper<T>& stepper,
                                                        int64_t h, int64_t m, uint64_t seed) {
  const auto& prm = stepper.params();
  std::vector<const ref::RingEntry<T>*> usable;
  for (int64_t p = m - prm.ring > 0 ? m - prm.ring : 0; p < m; ++p) {
    const auto* e = stepper.ring().find(h, p);
    if (e && !e->state.is_empty() && !(prm.sinks > 0 && prefix_end(p, prm.tail) < prm.sinks))
      usable.push_back(e);
  }
  if (usable.empty()) return {-1, {}};
  const uint64_t u =
      mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(m)) ^ static_cast<uint64_t>(h));
  const auto* e = usable[static_cast<size_t>((u >> 11) % usable.size())];
  return {e->pos, e->state.template cast<double>()};
}

/*! \brief Entropy (nats) of exact attention of head h at m over [0, m] and the mass of
 *  [tail_begin, m]: H = L − Σ_t p_t·x_t with x_t = s·q_m·k_t, p_t = e^{x_t − L}. */
std::pair<double, double> attention_stats(const ref::LayerData& layer, double scale, int64_t m,
                                          int64_t h, int64_t tail_begin) {
  const int64_t D = layer.head_dim, hk = h / layer.group_size();
  const float* q = layer.q_post_at(m, h);
  std::vector<double> x(static_cast<size_t>(m + 1));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t <= m; ++t) {
    const float* k = layer.k.data() + (t * layer.num_kv_heads + hk) * D;
    double d = 0;
    for (int64_t i = 0; i < D; ++i) d += static_cast<double>(q[i]) * static_cast<double>(k[i]);
    x[static_cast<size_t>(t)] = scale * d;
    mx = std::max(mx, x[static_cast<size_t>(t)]);
  }
  double z = 0, zx = 0, zt = 0;
  for (int64_t t = 0; t <= m; ++t) {
    const double e = std::exp(x[static_cast<size_t>(t)] - mx);
    z += e;
    zx += e * x[static_cast<size_t>(t)];
    if (t >= tail_begin) zt += e;
  }
  return {mx + std::log(z) - zx / z, zt / z};
}

/*! \brief The baselines of one hit (SimConfig::baselines, simulate.hpp), in FP64 with the
 *  current query: window = band ⊕ (sinks ⊕ tail), no band = entry(p) ⊕ (sinks ⊕ tail),
 *  random = (entry(p′) ⊕ attn(q_m, [E(p′), E(m)))) ⊕ (sinks ⊕ tail). */
void eval_baselines(const ref::LayerData& layer, double scale, int64_t m, int64_t h,
                    const std::pair<int64_t, ref::AttnState<double>>& rnd, int64_t r,
                    HeadRecord& rec) {
  const int64_t hk = h / layer.group_size();
  const float* q = layer.q_post_at(m, h);
  const auto sink = ref::attend<double>(layer, hk, q, scale, 0, rec.sink_end);
  const auto tail = ref::attend<double>(layer, hk, q, scale, rec.tail_begin, m + 1);
  const auto band = ref::attend<double>(layer, hk, q, scale, rec.band_begin, rec.band_end);
  const auto recent = ref::merge(sink, tail);
  rec.window_rel_l2 = rel_l2(ref::merge(band, recent).o, rec.exact.o);
  rec.noband_rel_l2 = rel_l2(ref::merge(rec.prefix, recent).o, rec.exact.o);
  rec.random_pos = rnd.first;
  rec.random_rel_l2 = std::numeric_limits<double>::quiet_NaN();
  if (rnd.first < 0) return;
  const auto band_r =
      ref::attend<double>(layer, hk, q, scale, prefix_end(rnd.first, r), rec.band_end);
  const auto out = ref::merge(ref::merge(rnd.second, band_r), recent);
  rec.random_rel_l2 = rel_l2(out.o, rec.exact.o);
}

template <typename T>
SimSummary run(const ref::LayerData& layer, double scale, const SimConfig& cfg,
               const std::function<void(const StepRecord&)>& on_step) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t Hq = layer.num_q_heads, S = cfg.num_steps(layer);
  ref::DecodeStepper<T> stepper(layer, scale, cfg.params, cfg.variant, cfg.storage);
  stepper.prefill(cfg.prefill, cfg.prefill_mode);
  std::unique_ptr<oracle::MacOracle> orc;
  if (cfg.oracle) orc = std::make_unique<oracle::MacOracle>(layer, scale, cfg.params, cfg.prefill);

  SimSummary sum;
  sum.heads = Hq;
  sum.head_hits.assign(static_cast<size_t>(Hq), 0);
  sum.head_keys_read.assign(static_cast<size_t>(Hq), 0);
  sum.head_max_rel_l2.assign(static_cast<size_t>(Hq), 0.0);
  Progress progress(cfg.label, S, 5.0, cfg.progress);
  StepRecord rec;
  rec.heads.resize(static_cast<size_t>(Hq));
  std::vector<oracle::Decision> decisions(static_cast<size_t>(Hq));
  const bool baselines = cfg.baselines && orc;
  const double threshold = match_threshold(layer.head_dim, cfg.params.tau);
  std::vector<std::pair<int64_t, ref::AttnState<double>>> rnd(static_cast<size_t>(Hq));
  for (int64_t i = 0; i < S; ++i) {
    const int64_t m = cfg.prefill + i;
    if (baselines)
      for (int64_t h = 0; h < Hq; ++h)
        rnd[static_cast<size_t>(h)] = random_entry(stepper, h, m, cfg.baseline_seed);
    const auto st = stepper.step(m, true);
    rec.position = m;
    rec.gate_mode = st.gate.mode;
    rec.bytes = st.gate.bytes;
    rec.bytes_full = st.gate.bytes_full;
    for (int64_t h = 0; h < Hq; ++h) {
      const auto& hs = st.heads[static_cast<size_t>(h)];
      auto& r = rec.heads[static_cast<size_t>(h)];
      r.eligible = hs.eligible;
      r.hit = hs.hit;
      r.gated = hs.policy == ref::PolicyMiss::kGated;
      r.best_pos = hs.match.best_pos;
      r.match_pos = hs.match_pos;
      r.d2 = hs.match.has_candidate ? static_cast<double>(hs.match.d2)
                                    : std::numeric_limits<double>::quiet_NaN();
      r.d2_fp64 =
          hs.match.has_candidate ? hs.match.d2_fp64 : std::numeric_limits<double>::quiet_NaN();
      r.margin =
          hs.match.has_candidate ? hs.match.margin : std::numeric_limits<double>::quiet_NaN();
      r.band_begin = hs.band_begin;
      r.band_end = hs.band_end;
      r.sink_end = hs.sink_end;
      r.tail_begin = hs.tail_begin;
      r.keys_read = hs.keys_read;
      r.depth = hs.depth;
      r.out = hs.out.template cast<double>();
      r.prefix = hs.prefix.template cast<double>();
      decisions[static_cast<size_t>(h)] = {hs.hit, hs.match_pos, true};
    }
    if (orc) {
      const auto os = orc->step(m, decisions);
      for (int64_t h = 0; h < Hq; ++h) {
        auto& r = rec.heads[static_cast<size_t>(h)];
        const auto& oh = os.heads[static_cast<size_t>(h)];
        r.oracle = oh.out;
        r.exact = oh.exact;
        r.rel_l2 = rel_l2(r.out.o, r.exact.o);
        r.max_abs = (r.out.o - r.exact.o).cwiseAbs().maxCoeff();
        r.lse_err = std::abs(r.out.lse - r.exact.lse);
        r.ref_rel_l2 = rel_l2(r.out.o, r.oracle.o);
        r.random_pos = -1;
        r.window_rel_l2 = r.noband_rel_l2 = r.random_rel_l2 =
            std::numeric_limits<double>::quiet_NaN();
      }
      // At most ~256 evenly spaced steps per layer: a mean needs no more, and at long
      // contexts this pass costs about what the oracle's full attention does.
      if (cfg.attention_stats && i % std::max<int64_t>(1, S / 256) == 0) {
        std::vector<std::pair<double, double>> st(static_cast<size_t>(Hq));
#pragma omp parallel for schedule(dynamic)
        for (int64_t h = 0; h < Hq; ++h)
          st[static_cast<size_t>(h)] =
              attention_stats(layer, scale, m, h, prefix_end(m, cfg.params.tail));
        for (const auto& x : st) {
          sum.entropy_sum += x.first;
          sum.tail_mass_sum += x.second;
          ++sum.attention_count;
        }
      }
      if (baselines) {
#pragma omp parallel for schedule(dynamic)
        for (int64_t h = 0; h < Hq; ++h) {
          auto& r = rec.heads[static_cast<size_t>(h)];
          if (r.hit)
            eval_baselines(layer, scale, m, h, rnd[static_cast<size_t>(h)], cfg.params.tail, r);
        }
      }
    }
    ++sum.steps;
    sum.gate_on += st.gate.mode == GateMode::kOn;
    sum.gate_off += st.gate.mode == GateMode::kOff;
    sum.gate_floor += st.gate.mode == GateMode::kFloor;
    sum.bytes += st.gate.bytes;
    sum.bytes_full += st.gate.bytes_full;
    sum.step_mode.push_back(static_cast<int64_t>(st.gate.mode));
    sum.step_hits.push_back(st.gate.hits);
    sum.step_bytes.push_back(st.gate.bytes);
    for (int64_t h = 0; h < Hq; ++h) {
      const auto& r = rec.heads[static_cast<size_t>(h)];
      sum.hits += r.hit;
      sum.eligible += r.eligible;
      sum.unusable_matches += r.eligible && !r.hit && r.d2 < threshold;
      sum.keys_read += r.keys_read;
      sum.keys_full += m + 1;
      sum.head_hits[static_cast<size_t>(h)] += r.hit;
      sum.head_keys_read[static_cast<size_t>(h)] += r.keys_read;
      if (orc) {
        sum.rel_l2.push_back(r.rel_l2);
        sum.head_max_rel_l2[static_cast<size_t>(h)] =
            std::max(sum.head_max_rel_l2[static_cast<size_t>(h)], r.rel_l2);
        sum.max_abs = std::max(sum.max_abs, r.max_abs);
        sum.max_lse_err = std::max(sum.max_lse_err, r.lse_err);
        sum.max_ref_rel_l2 = std::max(sum.max_ref_rel_l2, r.ref_rel_l2);
        if (!r.hit) sum.miss_max_rel_l2 = std::max(sum.miss_max_rel_l2, r.rel_l2);
        if (r.hit) {
          sum.hit_rel_l2.push_back(r.rel_l2);
          if (baselines) {
            sum.window_rel_l2.push_back(r.window_rel_l2);
            sum.noband_rel_l2.push_back(r.noband_rel_l2);
            if (r.random_pos >= 0) {
              sum.random_rel_l2.push_back(r.random_rel_l2);
              sum.hit_random_mac.push_back(r.rel_l2);
            }
          }
        }
      }
    }
    if (on_step) on_step(rec);
    progress.update(i + 1);
  }
  progress.finish();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace

SimSummary simulate_layer(const ref::LayerData& layer, double scale, const SimConfig& cfg,
                          const std::function<void(const StepRecord&)>& on_step) {
  cfg.validate(layer);
  if (cfg.precision == Precision::kFp32) return run<float>(layer, scale, cfg, on_step);
  return run<double>(layer, scale, cfg, on_step);
}

}  // namespace mac::tools
