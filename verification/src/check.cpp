#include "mac/verify/check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace mac::verify {

Tolerances Tolerances::cpu() {
  const double t = 1024.0 * std::numeric_limits<float>::epsilon();
  return {t, t, t, t, true};
}

double Tolerances::conditioning(const CaseSpec& spec) const {
  if (!logit_conditioned) return 1.0;
  const double s = spec.logit_scale();
  return std::max(1.0, s * s / 64.0);
}

const char* grading_text(Grading g) {
  switch (g) {
    case Grading::kMac:
      return "the MAC decisions of docs/semantics.md §3 (hit, matched position) and the FP64 "
             "oracle's output, LSE and ring entries at them";
    case Grading::kMacValues:
      return "the FP64 oracle's output, LSE and ring entries at the expected MAC decisions; the "
             "implementation reports no decisions, so none is checked";
    case Grading::kExact:
      return "exact attention attn(q_m, [0, m]) of the FP64 oracle (a plain decode kernel: no "
             "reuse, no ring; the MAC-specific checks do not apply)";
  }
  return "?";
}

const char* to_string(CaseStatus s) {
  switch (s) {
    case CaseStatus::kPass: return "pass";
    case CaseStatus::kFail: return "FAIL";
    case CaseStatus::kSkip: return "skip";
    case CaseStatus::kError: return "ERROR";
    case CaseStatus::kNotApplicable: return "n/a";
  }
  return "?";
}

double rel_l2(const std::vector<double>& a, const Eigen::VectorXd& b, double* max_abs) {
  const double inf = std::numeric_limits<double>::infinity();
  if (a.size() != static_cast<size_t>(b.size())) {
    if (max_abs) *max_abs = inf;
    return inf;
  }
  // Scaled by the largest |b| so values near the ends of the range neither overflow nor
  // underflow when squared.
  double s = 0;
  for (Eigen::Index d = 0; d < b.size(); ++d) s = std::max(s, std::abs(b[d]));
  if (!(s > 0)) s = 1;
  double num = 0, den = 0, mx = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    const double e = a[d] - b[static_cast<Eigen::Index>(d)];
    if (std::isnan(e)) {
      if (max_abs) *max_abs = inf;
      return inf;
    }
    mx = std::max(mx, std::abs(e));
    num += (e / s) * (e / s);
    den += (b[static_cast<Eigen::Index>(d)] / s) * (b[static_cast<Eigen::Index>(d)] / s);
  }
  if (max_abs) *max_abs = mx;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

namespace {
double lse_err(double got, double want) {
  if (std::isinf(want) && want < 0)
    return (std::isinf(got) && got < 0) ? 0.0 : std::numeric_limits<double>::infinity();
  const double e = std::abs(got - want);
  return std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
}
double lse_limit(double tol, double want) { return tol * std::max(1.0, std::abs(want)); }
}  // namespace

std::string gate_state_diff(const std::array<int64_t, 5>& got, const GateState& want) {
  const auto w = gate_state_row(want);
  for (size_t f = 0; f < w.size(); ++f)
    if (got[f] != w[f]) return msg(kGateStateFields[f], " got ", got[f], ", expected ", w[f]);
  return {};
}

CaseResult run_case(const CaseSpec& spec, Implementation& impl, const RunOptions& opt,
                    CaseInputs* inputs_out) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult res;
  res.spec = spec;
  std::string why;
  if (!impl.supports(spec, &why)) {
    res.status = CaseStatus::kNotApplicable;
    res.message = why;
    return res;
  }
  res.trials = 1;
  const int Hq = spec.Hq();
  Tolerances tol = opt.tol;
  const double cond = tol.conditioning(spec);
  tol.out_rel_l2 *= cond;
  tol.entry_rel_l2 *= cond;
  std::vector<StepRecord> records;
  try {
    CaseInputs in = make_inputs(with_nonce(spec, opt.nonce));
    res.heads.resize(static_cast<size_t>(spec.batch) * Hq);
    for (int i = 0; i < spec.batch; ++i)
      for (int h = 0; h < Hq; ++h) {
        auto& hm = res.heads[static_cast<size_t>(i) * Hq + h];
        hm.request = i;
        hm.head = h;
        hm.min_abs_margin = std::numeric_limits<double>::infinity();
      }
    Expected expected(in, opt.expected_storage);
    impl.begin(in);
    auto fail = [&](HeadMetrics& hm, const std::string& what) {
      hm.failed = true;
      if (res.message.empty()) res.message = what;
    };
    for (int64_t s = 0; s < spec.steps; ++s) {
      StepRecord rec;
      rec.expected = expected.step(s);
      impl.step(s, &rec.actual);
      require(rec.actual.size() == static_cast<size_t>(spec.batch), impl.name(), " returned ",
              rec.actual.size(), " rows, expected ", spec.batch);
      for (int i = 0; i < spec.batch; ++i) {
        require(rec.actual[static_cast<size_t>(i)].size() == static_cast<size_t>(Hq), impl.name(),
                " returned a row of ", rec.actual[static_cast<size_t>(i)].size(),
                " heads, expected ", Hq);
        for (int h = 0; h < Hq; ++h) {
          const auto& e = rec.expected[static_cast<size_t>(i)][static_cast<size_t>(h)];
          const auto& a = rec.actual[static_cast<size_t>(i)][static_cast<size_t>(h)];
          auto& hm = res.heads[static_cast<size_t>(i) * Hq + h];
          const int64_t m = e.position;
          const std::string where = msg("request ", i, " head ", h, " m ", m, ": ");
          // A plain decode kernel is held to exact attention: no decision, m + 1 keys.
          const bool exact = opt.grading == Grading::kExact;
          const oracle::State& want = exact ? e.exact : e.out;
          const int64_t keys_want = exact ? m + 1 : e.keys_read;
          ++hm.steps;
          hm.planted +=
              in.requests[static_cast<size_t>(i)].planted[static_cast<size_t>(s) * Hq + h];
          if (!exact) {
            hm.eligible += e.eligible;
            hm.expected_hits += e.hit;
            if (e.eligible && !std::isnan(e.margin))
              hm.min_abs_margin = std::min(hm.min_abs_margin, std::abs(e.margin));
          }
          hm.hits += a.decision_reported && a.hit;
          if (opt.grading == Grading::kMac && !a.decision_reported)
            throw std::runtime_error(impl.name() + " reported no decisions to grade");
          if (opt.grading == Grading::kMac &&
              (a.hit != e.hit || (e.hit && a.match_pos != e.match_pos))) {
            ++hm.decision_mismatch;
            fail(hm, where + msg("decision: got hit ", a.hit, " p ", a.match_pos, ", expected hit ",
                                 e.hit, " p ", e.match_pos, " (nearest ", e.best_pos, ", d2 ", e.d2,
                                 ")"));
          }
          hm.keys_expected += keys_want;
          hm.keys_full += m + 1;
          if (a.keys_read >= 0) {
            hm.keys_read += a.keys_read;
            if (a.keys_read != keys_want) {
              ++hm.keys_mismatch;
              fail(hm, where + msg("keys read ", a.keys_read, ", expected ", keys_want));
            }
          }
          double mabs = 0;
          const double rl = rel_l2(a.o, want.o, &mabs);
          hm.rel_l2_max = std::max(hm.rel_l2_max, rl);
          hm.max_abs_err = std::max(hm.max_abs_err, mabs);
          const double le = lse_err(a.lse, want.lse);
          hm.lse_err_max = std::max(hm.lse_err_max, le);
          if (!(rl <= tol.out_rel_l2))
            fail(hm, where + msg("output rel L2 ", rl, " > ", tol.out_rel_l2,
                                 exact ? " (vs exact attention)" : ""));
          if (!(le <= lse_limit(tol.lse, want.lse)))
            fail(hm, where + msg("LSE error ", le, " (L = ", want.lse, ") > ",
                                 lse_limit(tol.lse, want.lse)));
          double fa = 0;
          hm.mac_vs_full_rel_l2_max =
              std::max(hm.mac_vs_full_rel_l2_max,
                       rel_l2(std::vector<double>(e.out.o.data(), e.out.o.data() + e.out.o.size()),
                              e.exact.o, &fa));
          if (a.entry_valid) {
            if (e.wrote_entry) {
              ++hm.entries_checked;
              if (!a.entry_written || !a.entry_q_exact) {
                ++hm.entry_mismatch;
                fail(hm, where + (a.entry_written ? "ring entry q̃ is not a bit copy of q̃_m"
                                                  : "ring entry of m not written"));
              } else {
                const bool want_empty = e.entry.is_empty();
                double rl2 = 0, le2 = lse_err(a.entry_lse, e.entry.lse);
                if (!want_empty) rl2 = rel_l2(a.entry_o, e.entry.o);
                hm.entry_rel_l2_max = std::max(hm.entry_rel_l2_max, rl2);
                hm.entry_lse_err_max = std::max(hm.entry_lse_err_max, le2);
                if (!(rl2 <= tol.entry_rel_l2))
                  fail(hm, where + msg("ring entry rel L2 ", rl2, " > ", tol.entry_rel_l2));
                if (!(le2 <= lse_limit(tol.entry_lse, e.entry.lse)))
                  fail(hm, where + msg("ring entry LSE ", a.entry_lse, ", expected ", e.entry.lse));
                // The chain depth, where reported, decides later depth-cap decisions.
                if (a.entry_depth >= 0 && a.entry_depth != e.depth) {
                  ++hm.entry_mismatch;
                  fail(hm, where + msg("ring entry depth ", a.entry_depth, ", expected ", e.depth));
                }
              }
            } else if (a.entry_written) {
              ++hm.entries_checked;
              ++hm.entry_mismatch;
              fail(hm, where + "ring entry written for a request that is not ready");
            }
          }
          if (!e.eligible && a.full_bit_identical >= 0) {
            ++hm.bit_checked;
            if (a.full_bit_identical == 0) {
              ++hm.bit_mismatch;
              fail(hm, where + "ineligible head not bit-identical to full attention");
            }
          }
        }
      }
      // The gate's state (§3.5) decides the steps to come: an implementation that keeps one
      // must keep the reference's, bit for bit, whatever its decisions so far.
      for (int i = 0; i < spec.batch; ++i) {
        std::array<int64_t, 5> got{};
        if (!impl.gate_state(i, &got)) continue;
        const std::string d = gate_state_diff(got, expected.gate_state(i));
        if (!d.empty())
          fail(res.heads[static_cast<size_t>(i) * Hq],
               msg("request ", i, " m ", in.requests[static_cast<size_t>(i)].prompt + s,
                   ": gate state ", d));
      }
      records.push_back(std::move(rec));
    }
    // An implementation-level problem (device error flags, bad prefill entries) is usually
    // the root cause of later check failures: it comes first in the message.
    const std::string end_msg = impl.end();
    if (!end_msg.empty()) {
      res.message =
          res.message.empty() ? end_msg : end_msg + " | first check failure: " + res.message;
      res.status = CaseStatus::kFail;
    }
    if (inputs_out) *inputs_out = std::move(in);
  } catch (const std::exception& ex) {
    res.status = CaseStatus::kError;
    res.message = ex.what();
    try {
      impl.end();
    } catch (...) {
    }
  }
  for (auto& hm : res.heads) {
    if (std::isinf(hm.min_abs_margin)) hm.min_abs_margin = std::numeric_limits<double>::quiet_NaN();
    if (hm.failed && res.status == CaseStatus::kPass) res.status = CaseStatus::kFail;
    res.decision_mismatch += hm.decision_mismatch;
    res.hits += hm.hits;
    res.expected_hits += hm.expected_hits;
    res.eligible += hm.eligible;
    res.head_steps += hm.steps;
    res.keys_read += hm.keys_read;
    res.keys_expected += hm.keys_expected;
    res.keys_full += hm.keys_full;
    res.keys_mismatch += hm.keys_mismatch;
    res.entry_mismatch += hm.entry_mismatch;
    res.entries_checked += hm.entries_checked;
    res.bit_checked += hm.bit_checked;
    res.bit_mismatch += hm.bit_mismatch;
    res.rel_l2_max = std::max(res.rel_l2_max, hm.rel_l2_max);
    res.max_abs_err = std::max(res.max_abs_err, hm.max_abs_err);
    res.lse_err_max = std::max(res.lse_err_max, hm.lse_err_max);
    res.entry_rel_l2_max = std::max(res.entry_rel_l2_max, hm.entry_rel_l2_max);
    res.entry_lse_err_max = std::max(res.entry_lse_err_max, hm.entry_lse_err_max);
    res.mac_vs_full_rel_l2_max = std::max(res.mac_vs_full_rel_l2_max, hm.mac_vs_full_rel_l2_max);
  }
  if (res.status != CaseStatus::kPass && opt.keep_steps_on_failure) res.steps = std::move(records);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

namespace {
/*! Adds trial `b`'s counters to `a` and takes the maxima of the error fields (a head's or a
 *  case's: both have these fields). */
template <typename Row>
void accumulate(Row& a, const Row& b) {
  for (int64_t Row::*f :
       {&Row::eligible, &Row::hits, &Row::expected_hits, &Row::decision_mismatch, &Row::keys_read,
        &Row::keys_expected, &Row::keys_full, &Row::keys_mismatch, &Row::entries_checked,
        &Row::entry_mismatch, &Row::bit_checked, &Row::bit_mismatch})
    a.*f += b.*f;
  for (double Row::*f :
       {&Row::rel_l2_max, &Row::max_abs_err, &Row::lse_err_max, &Row::entry_rel_l2_max,
        &Row::entry_lse_err_max, &Row::mac_vs_full_rel_l2_max})
    a.*f = std::max(a.*f, b.*f);
}
}  // namespace

CaseResult run_trials(const CaseSpec& spec, Implementation& impl, const RunOptions& opt, int trials,
                      uint64_t* nonce_out) {
  require(trials >= 1, "trials = ", trials, " (at least 1)");
  CaseResult total;
  for (int t = 0; t < trials; ++t) {
    RunOptions o = opt;
    o.nonce = trial_nonce(opt.nonce, t);
    *nonce_out = o.nonce;
    CaseResult r = run_case(spec, impl, o);
    if (t == 0) {
      total = std::move(r);
    } else {
      accumulate(total, r);
      total.head_steps += r.head_steps;
      total.wall_s += r.wall_s;
      total.trials += r.trials;
      if (r.heads.size() == total.heads.size())
        for (size_t k = 0; k < r.heads.size(); ++k) {
          auto& a = total.heads[k];
          const auto& b = r.heads[k];
          accumulate(a, b);
          a.steps += b.steps;
          a.planted += b.planted;
          a.failed = a.failed || b.failed;
          if (!std::isnan(b.min_abs_margin))
            a.min_abs_margin = std::isnan(a.min_abs_margin)
                                   ? b.min_abs_margin
                                   : std::min(a.min_abs_margin, b.min_abs_margin);
        }
      total.status = r.status;
      total.message = std::move(r.message);
      total.steps = std::move(r.steps);
    }
    if (total.status != CaseStatus::kPass) {
      if (trials > 1 && total.status != CaseStatus::kNotApplicable) {
        char b[64];
        std::snprintf(b, sizeof b, "trial %d of %d (nonce 0x%016llx): ", t, trials,
                      static_cast<unsigned long long>(o.nonce));
        total.message = b + total.message;
      }
      break;
    }
  }
  return total;
}

}  // namespace mac::verify
