#include "mac/tools/simulate.hpp"

#include "mac/oracle/oracle.hpp"
#include "mac/ref/stepper.hpp"
#include "mac/tools/progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

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
  for (int64_t i = 0; i < S; ++i) {
    const int64_t m = cfg.prefill + i;
    const auto st = stepper.step(m, true);
    rec.position = m;
    for (int64_t h = 0; h < Hq; ++h) {
      const auto& hs = st.heads[static_cast<size_t>(h)];
      auto& r = rec.heads[static_cast<size_t>(h)];
      r.eligible = hs.eligible;
      r.hit = hs.hit;
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
      }
    }
    ++sum.steps;
    for (int64_t h = 0; h < Hq; ++h) {
      const auto& r = rec.heads[static_cast<size_t>(h)];
      sum.hits += r.hit;
      sum.eligible += r.eligible;
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
