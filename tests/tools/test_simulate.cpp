// mac::tools::simulate_layer and its helpers (tools/common/src/simulate.cpp), the loop behind
// mac-sim and mac-study: the golden run dump reproduced, the summary's counts consistent
// with the steps it reports, the configuration checks and warnings, and the quantiles.
#include "io_fixture.hpp"
#include "mac/io/run_dump.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/synth.hpp"
#include "mac/tools/simulate.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using mac::tools::SimConfig;

namespace {

const std::string kSrc = MAC_SOURCE_DIR;
const std::string kTrace = kSrc + "/data/golden/synth_small.h5";
const std::string kGoldenRun = kSrc + "/data/golden/synth_small_run.h5";

/*! A synthetic layer of T tokens (Hq 4, Hkv 2, D 64) and its softmax scale. */
struct Layer {
  mac::ref::LayerData data;
  double scale = 0;
};
Layer synthetic_layer(int64_t tokens) {
  mac::ref::SynthParams p;
  p.tokens = tokens;
  p.num_layers = 1;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.seed = 3;
  auto t = mac::ref::generate_synthetic_trace(p);
  return {std::move(t.layers[0]), t.meta.softmax_scale};
}

/*! A configuration that reuses from the first decode step on a T-token layer. */
SimConfig reusing(int64_t prefill) {
  SimConfig c;
  c.prefill = prefill;
  c.params.gen_min = 0;
  c.params.ring = 64;
  c.params.tail = 8;
  c.params.sinks = 0;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(simulate)

// The golden dump was written by
//   mac-sim --trace data/golden/synth_small.h5 --layer 0 --prefill 256 --steps 128 --gen-min 0
//           --ring 128 --tail 32 --precision fp64 --storage full --dump
//           data/golden/synth_small_run.h5
// Decisions depend only on the canonical FP32 distance, so they must match bit for bit;
// FP64 outputs may differ by the summation order of the platform's vector units, far
// below 1e-12 relative.
BOOST_AUTO_TEST_CASE(reproduces_the_golden_run_dump) {
  const auto golden = mac::io::read_run_dump(kGoldenRun);
  const auto layer = mac::io::read_trace_layer(kTrace, 0);
  const auto meta = mac::io::read_trace_meta(kTrace);
  mac::tools::SimConfig cfg;
  static_cast<mac::StepperConfig&>(cfg) = golden.config;
  cfg.steps = golden.steps;
  BOOST_TEST_REQUIRE(golden.steps == 128);
  int64_t s = 0, hits = 0;
  double worst = 0, worst_exact = 0;
  mac::tools::simulate_layer(
      layer, meta.softmax_scale, cfg, [&](const mac::tools::StepRecord& rec) {
        BOOST_TEST_REQUIRE(rec.position == golden.position[static_cast<size_t>(s)]);
        for (int64_t h = 0; h < golden.num_q_heads; ++h) {
          const auto i = static_cast<size_t>(s * golden.num_q_heads + h);
          const auto& r = rec.heads[static_cast<size_t>(h)];
          BOOST_TEST_REQUIRE(static_cast<int>(r.hit) == static_cast<int>(golden.hit[i]));
          BOOST_TEST_REQUIRE((r.hit ? r.match_pos : -1) == golden.match_pos[i]);
          BOOST_TEST_REQUIRE(r.keys_read == golden.kv_tokens_read[i]);
          BOOST_TEST_REQUIRE(
              (r.d2 == golden.d2[i] || (std::isnan(r.d2) && std::isnan(golden.d2[i]))));
          hits += r.hit;
          double num = 0, den = 0, num_e = 0, den_e = 0;
          for (int64_t d = 0; d < golden.head_dim; ++d) {
            const size_t j = i * static_cast<size_t>(golden.head_dim) + static_cast<size_t>(d);
            num += std::pow(r.out.o[d] - golden.out[j], 2);
            den += std::pow(golden.out[j], 2);
            num_e += std::pow(r.exact.o[d] - golden.exact_out[j], 2);
            den_e += std::pow(golden.exact_out[j], 2);
          }
          worst = std::max(worst, std::sqrt(num / den));
          worst_exact = std::max(worst_exact, std::sqrt(num_e / den_e));
          BOOST_TEST(std::abs(r.out.lse - golden.lse[i]) < 1e-12);
        }
        ++s;
      });
  BOOST_TEST(s == 128);
  BOOST_TEST(hits > 0);
  BOOST_TEST(hits < 128 * golden.num_q_heads);
  BOOST_TEST(worst < 1e-12);
  BOOST_TEST(worst_exact < 1e-13);
}

// The summary counts what the steps report: hits and keys read per head, positions P to
// P + S − 1, misses equal to exact attention up to FP64 rounding, and hit rate and keys-read
// fraction their ratios.
BOOST_AUTO_TEST_CASE(the_summary_counts_what_the_steps_report) {
  const auto L = synthetic_layer(160);
  SimConfig cfg = reusing(96);
  cfg.precision = mac::Precision::kFp64;
  cfg.steps = 48;
  int64_t steps = 0, hits = 0, eligible = 0, keys = 0, full = 0;
  std::vector<int64_t> head_hits(4, 0);
  double worst_miss = 0;
  const auto s =
      mac::tools::simulate_layer(L.data, L.scale, cfg, [&](const mac::tools::StepRecord& r) {
        BOOST_TEST_REQUIRE(r.position == cfg.prefill + steps);
        BOOST_TEST_REQUIRE(r.heads.size() == 4u);
        for (size_t h = 0; h < r.heads.size(); ++h) {
          const auto& hr = r.heads[h];
          hits += hr.hit;
          head_hits[h] += hr.hit;
          eligible += hr.eligible;
          keys += hr.keys_read;
          full += r.position + 1;
          BOOST_TEST(hr.keys_read <= r.position + 1);
          BOOST_TEST((!hr.hit || hr.eligible));
          if (!hr.hit) {
            BOOST_TEST(hr.keys_read == r.position + 1);
            worst_miss = std::max(worst_miss, hr.rel_l2);
          }
        }
        ++steps;
      });
  BOOST_TEST(steps == 48);
  BOOST_TEST(s.steps == 48);
  BOOST_TEST(s.heads == 4);
  BOOST_TEST(s.hits == hits);
  BOOST_TEST(hits > 0);  // gen_min 0, a ring of 64: this layer reuses
  BOOST_TEST(s.eligible == eligible);
  BOOST_TEST(s.keys_read == keys);
  BOOST_TEST(s.keys_full == full);
  BOOST_TEST(keys < full);
  BOOST_TEST(s.head_hits == head_hits, boost::test_tools::per_element());
  BOOST_TEST(std::accumulate(s.head_hits.begin(), s.head_hits.end(), int64_t{0}) == s.hits);
  BOOST_TEST(s.rel_l2.size() == 48u * 4u);
  BOOST_TEST(s.hit_rel_l2.size() == static_cast<size_t>(hits));
  BOOST_TEST(s.hit_rate() == static_cast<double>(hits) / (48.0 * 4.0));
  BOOST_TEST(s.kv_fraction() == static_cast<double>(keys) / static_cast<double>(full));
  // A miss is exact attention computed in FP64 by the stepper; the oracle's summation order
  // differs, so they agree to a few units of FP64 rounding over at most 160 terms.
  BOOST_TEST(worst_miss < 1e-13);
  BOOST_TEST(s.miss_max_rel_l2 == worst_miss);
}

BOOST_AUTO_TEST_CASE(steps_zero_runs_to_the_end_of_the_layer) {
  const auto L = synthetic_layer(64);
  SimConfig cfg = reusing(60);
  BOOST_TEST(cfg.num_steps(L.data) == 4);
  cfg.steps = 2;
  BOOST_TEST(cfg.num_steps(L.data) == 2);
  int64_t n = 0;
  cfg.steps = 0;
  cfg.oracle = false;
  mac::tools::simulate_layer(L.data, L.scale, cfg, [&](const mac::tools::StepRecord&) { ++n; });
  BOOST_TEST(n == 4);
}

BOOST_AUTO_TEST_CASE(validate_names_the_prefill_and_the_steps) {
  const auto L = synthetic_layer(64);
  SimConfig cfg = reusing(0);
  mac::test::expect_input_error([&] { cfg.validate(L.data); },
                                {"prefill P = 0 must be in [1, 63]"});
  cfg.prefill = 64;
  mac::test::expect_input_error([&] { cfg.validate(L.data); }, {"prefill P = 64"});
  cfg.prefill = 60;
  cfg.steps = 5;
  mac::test::expect_input_error([&] { cfg.validate(L.data); }, {"steps = 5 with prefill 60"});
  cfg.steps = 4;
  BOOST_CHECK_NO_THROW(cfg.validate(L.data));
}

// Each degenerate configuration gives one line naming the value; a sound one none.
BOOST_AUTO_TEST_CASE(config_warnings_name_each_degenerate_setting) {
  const auto L = synthetic_layer(64);  // decode steps m = 48 … 63
  SimConfig ok = reusing(48);
  BOOST_TEST(mac::tools::config_warnings(L.data, ok).empty());

  SimConfig late = ok;
  late.params.gen_min = 64;
  auto w = mac::tools::config_warnings(L.data, late);
  BOOST_TEST_REQUIRE(w.size() == 1u);
  BOOST_TEST(w[0].find("gen_min = 64 is past the last decode step m = 63") != std::string::npos,
             w[0]);
  late.params.gen_min = 63;  // the last step may reuse
  BOOST_TEST(mac::tools::config_warnings(L.data, late).empty());

  SimConfig all_tail = ok;
  all_tail.params.tail = 64;
  w = mac::tools::config_warnings(L.data, all_tail);
  BOOST_TEST_REQUIRE(w.size() == 1u);
  BOOST_TEST(w[0].find("tail r = 64 holds every key") != std::string::npos, w[0]);

  // entry(p) is usable from p = r + F; the last candidate is m − 1 = 62.
  SimConfig no_entry = ok;
  no_entry.params.tail = 60;
  no_entry.params.sinks = 3;
  w = mac::tools::config_warnings(L.data, no_entry);
  BOOST_TEST_REQUIRE(w.size() == 1u);
  BOOST_TEST(w[0].find("from p = r + F = 63, past the last candidate p = 62") != std::string::npos,
             w[0]);
  no_entry.params.sinks = 2;  // p = 62 can hold one
  BOOST_TEST(mac::tools::config_warnings(L.data, no_entry).empty());
}

BOOST_AUTO_TEST_CASE(run_warnings_only_when_every_match_was_unusable) {
  SimConfig cfg = reusing(48);
  cfg.params.tail = 30;
  cfg.params.sinks = 4;
  mac::tools::SimSummary s;
  BOOST_TEST(mac::tools::run_warnings(s, cfg).empty());
  s.unusable_matches = 7;
  const auto w = mac::tools::run_warnings(s, cfg);
  BOOST_TEST_REQUIRE(w.size() == 1u);
  BOOST_TEST(w[0].find("7 head-steps") != std::string::npos, w[0]);
  BOOST_TEST(w[0].find("p < r + F = 34") != std::string::npos, w[0]);
  s.hits = 1;  // something was reused: not degenerate
  BOOST_TEST(mac::tools::run_warnings(s, cfg).empty());
}

BOOST_AUTO_TEST_CASE(quantile_interpolates_linearly_between_sorted_values) {
  using mac::tools::quantile;
  const std::vector<double> v = {3, 1, 2, 10};  // sorted: 1 2 3 10
  BOOST_TEST(quantile(v, 0.0) == 1.0);
  BOOST_TEST(quantile(v, 1.0) == 10.0);
  BOOST_TEST(quantile(v, 0.5) == 2.5);        // position 1.5
  BOOST_TEST(quantile(v, 2.0 / 3.0) == 3.0);  // position 2
  BOOST_TEST(quantile(v, 5.0 / 6.0) == 6.5);  // position 2.5
  BOOST_TEST(quantile({4.0}, 0.9) == 4.0);
  BOOST_TEST(std::isnan(quantile({}, 0.5)));
  BOOST_TEST(v[0] == 3.0);  // the caller's values are not reordered
}

BOOST_AUTO_TEST_SUITE_END()
