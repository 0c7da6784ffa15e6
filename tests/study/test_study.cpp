// test_study: mac-study (tools/mac-study): chain-depth bookkeeping, the per-step drift bound
// on hand-made cases, and resuming an interrupted sweep.
#include <boost/test/unit_test.hpp>

#include "mac/io/atomic_file.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/study/study.hpp"
#include "test_layers.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace mac;
using namespace mac::study;

namespace {

struct ScratchDir {
  fs::path dir;
  ScratchDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("mac_test_study_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& n) const { return (dir / n).string(); }
};

/*! A layer whose head-0 pre-RoPE query walks in small exact steps along dim 0
 *  (q̃_t[0] = base + t/4): the nearest candidate is always the previous position. */
ref::LayerData walking_layer(int64_t T, uint64_t seed) {
  auto l = test::random_layer(T, 2, 1, 64, seed);
  std::vector<float> q(64);
  for (int64_t t = 0; t < T; ++t) {
    const float* src = l.q_pre_at(0, 0);
    for (int64_t i = 0; i < 64; ++i) q[static_cast<size_t>(i)] = src[i];
    q[0] = static_cast<float>(t) * 0.25f;
    test::set_q_pre(l, t, 0, q.data());
  }
  return l;
}

RunSpec spec_for(const ref::LayerData& l, int64_t P, int64_t S, MacParams p) {
  RunSpec s;
  s.trace = "(test)";
  s.source = "test";
  s.fingerprint = layer_fingerprint(l, P + S);
  s.params = p;
  s.prefill = P;
  s.steps = S;
  s.storage = StateStorage::kFull;
  s.precision = mac::Precision::kFp64;
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(chain_depth)

BOOST_AUTO_TEST_CASE(tracker_segments_partition_the_prefix) {
  // M = 4, r = 2, F = 1. Prompt 0..5 (entries 2..5), then steps 6..11.
  ChainTracker c(4, 2, 1);
  for (int64_t p = 2; p < 6; ++p) c.prefill(p);
  BOOST_TEST(c.entry(1) == nullptr);
  BOOST_TEST(c.entry(5)->depth == 0);
  // hits on 5, 6, then a miss, then a hit on 8 (the miss), then a hit at lag M = 4 (9 → slot of 9
  // - 4... )
  BOOST_TEST(c.step(6, 5).depth == 1);
  BOOST_TEST(c.step(7, 6).depth == 2);
  BOOST_TEST(c.step(8, -1).depth == 0);
  BOOST_TEST(c.step(9, 8).depth == 1);
  BOOST_TEST(c.step(10, 7).depth == 3);  // reuses 7 (depth 2)
  // Lag exactly M: the slot of 11 holds 7; the entry is read before it is overwritten.
  BOOST_TEST(c.step(11, 7).depth == 3);
  BOOST_TEST(c.entry(7) == nullptr);
  for (int64_t p : {9, 10, 11}) {
    const auto segs = c.segments(p);
    // Newest first, contiguous, ending at E(p) and starting at Fe(E(p)) = 1.
    BOOST_TEST(segs.front().end == prefix_end(p, 2));
    BOOST_TEST(segs.back().begin == 1);
    BOOST_TEST(segs.front().qpos == p);
    for (size_t i = 1; i < segs.size(); ++i) BOOST_TEST(segs[i].end == segs[i - 1].begin);
    BOOST_TEST(static_cast<int64_t>(segs.size()) == c.entry(p)->depth + 1);
  }
  // 10's chain: 10 ← 7 ← 6 ← 5 (prefill).
  std::vector<int64_t> qs;
  for (const auto& s : c.segments(10)) qs.push_back(s.qpos);
  BOOST_TEST(qs == (std::vector<int64_t>{10, 7, 6, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(walking_queries_build_one_long_chain) {
  // Each step's nearest candidate is the previous position (d2 = 1/16 < thr), so step i
  // after a prompt of P writes depth i + 1: a chain through every step.
  const int64_t T = 96, P = 16, S = T - P;
  const auto l = walking_layer(T, 11);
  const auto spec = spec_for(l, P, S, MacParams{0.45, 8, 4, 0, 0});
  const auto exact = ExactCache::compute(l, test::default_scale(64), P, S, false, "t");
  const auto r =
      execute_run(l, test::default_scale(64), spec, exact);  // also checks tracker == stepper
  for (int64_t i = 0; i < S; ++i) {
    BOOST_TEST(r.hit[static_cast<size_t>(i * 2)] == 1);
    BOOST_TEST(r.lag[static_cast<size_t>(i * 2)] == 1);
    BOOST_TEST(r.depth[static_cast<size_t>(i * 2)] == i + 1);
  }
}

BOOST_AUTO_TEST_CASE(depth_follows_the_recorded_decisions) {
  // Random layer with repeated queries: depth(m) = hit ? depth(m − lag) + 1 : 0, with every
  // prompt entry at depth 0, recomputed from the recorded hits and lags.
  const int64_t T = 200, P = 40, S = T - P;
  auto l = test::random_layer(T, 4, 2, 64, 5);
  for (int64_t t = 1; t < T; ++t)
    for (int64_t h = 0; h < 4; ++h)
      if ((t * 7 + h * 3) % 11 != 0) {  // most positions nudge an earlier query: chains
        const int64_t src = std::max<int64_t>(0, t - 1 - ((t + h) % 3));
        std::vector<float> q(l.q_pre_at(src, h), l.q_pre_at(src, h) + 64);
        q[static_cast<size_t>(t % 64)] += 0.25f;
        test::set_q_pre(l, t, h, q.data());
      }
  const auto spec = spec_for(l, P, S, MacParams{0.2, 16, 8, 0, 0});
  const auto exact = ExactCache::compute(l, test::default_scale(64), P, S, false, "t");
  const auto r = execute_run(l, test::default_scale(64), spec, exact);
  int64_t hits = 0, deep = 0;
  for (int64_t h = 0; h < 4; ++h) {
    std::vector<int64_t> depth(static_cast<size_t>(T), 0);
    for (int64_t i = 0; i < S; ++i) {
      const auto k = static_cast<size_t>(i * 4 + h);
      const int64_t m = P + i;
      const int64_t want = r.hit[k] ? depth[static_cast<size_t>(m - r.lag[k])] + 1 : 0;
      BOOST_TEST(r.depth[k] == want);
      depth[static_cast<size_t>(m)] = want;
      hits += r.hit[k];
      deep += want >= 3;
    }
  }
  BOOST_TEST(hits > S);  // the case exercises chains, not only misses
  BOOST_TEST(deep > 0);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(bound)

BOOST_AUTO_TEST_CASE(mass_shift_hand_values) {
  BOOST_TEST(mass_shift_bound(0.5, 0.0, 0.0) == 0.0);
  BOOST_TEST(mass_shift_bound(0.0, -3.0, 3.0) == 0.0);
  BOOST_TEST(mass_shift_bound(1.0, -3.0, 3.0) == 0.0);
  // ρ = 1/2, logit 0: |σ(±1) − 1/2| = 0.2310585786...
  BOOST_TEST(mass_shift_bound(0.5, -1.0, 1.0) == 1.0 / (1.0 + std::exp(-1.0)) - 0.5,
             boost::test_tools::tolerance(1e-14));
  // One-sided drift: only the b side moves ρ̃ far.
  const double rho = 0.2, l = std::log(rho / (1 - rho));
  BOOST_TEST(mass_shift_bound(rho, 0.0, 2.0) == 1.0 / (1.0 + std::exp(-(l + 2.0))) - rho,
             boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(no_drift_no_bound) {
  BoundInputs in{0.0, 0.0, 0.3, 5.0, 2.0};
  BOOST_TEST(drift_bound(in) == 0.0);
  BOOST_TEST(paper_bound(in) == 0.0);
  in.delta_min = in.delta_max = 0.7;  // a constant drift moves only the prefix's mass
  BOOST_TEST(drift_bound(in) == 2.0 * 5.0 * mass_shift_bound(0.3, 0.7, 0.7),
             boost::test_tools::tolerance(1e-14));
  BOOST_TEST(paper_bound(in) == 0.7 * 0.7 * 2.0, boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(two_key_case_attains_the_bound) {
  // Prefix of two keys, no recomputed keys (ρ = 0), values v = −e and +e (Vmax = 1, diameter 2).
  // x = (0, W/2), drift δ = (0, W): x̃ = (0, −W/2). Then TV(π, π̃) = tanh(W/4), the largest any
  // drift of range W can cause, and ‖õ − o‖ = 2·tanh(W/4) = B exactly.
  for (double W : {0.01, 0.5, 2.0, 8.0}) {
    const double x1 = 0, x2 = W / 2, xt1 = 0, xt2 = -W / 2;
    const double p1 = 1 / (1 + std::exp(x2 - x1)), pt1 = 1 / (1 + std::exp(xt2 - xt1));
    const double o = -p1 + (1 - p1), ot = -pt1 + (1 - pt1);  // along e
    const double err = std::abs(ot - o);
    BoundInputs in{0.0, W, 0.0, 1.0, 1.0};
    BOOST_TEST(err == drift_bound(in), boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(random_hand_made_cases_never_exceed_the_bound) {
  // Prefix keys with logits x and drifts δ, recomputed keys R; o_full and o_mac computed
  // directly from the definitions (docs/semantics.md §2) in FP64.
  std::mt19937_64 rng(20261129);
  std::normal_distribution<double> n(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  double worst = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int np = 1 + static_cast<int>(u(rng) * 20), nr = static_cast<int>(u(rng) * 6), d = 4;
    const double xs = 3 * u(rng), ds = 2 * u(rng) * u(rng), shift = n(rng);
    std::vector<double> x(static_cast<size_t>(np + nr)), dl(static_cast<size_t>(np));
    std::vector<std::vector<double>> v(static_cast<size_t>(np + nr), std::vector<double>(d));
    double vmax = 0, vsum = 0;
    for (int t = 0; t < np + nr; ++t) {
      x[static_cast<size_t>(t)] = xs * n(rng) + (t >= np ? shift : 0.0);
      double nn = 0;
      for (auto& c : v[static_cast<size_t>(t)]) {
        c = n(rng);
        nn += c * c;
      }
      vmax = std::max(vmax, std::sqrt(nn));
      if (t < np) vsum += std::sqrt(nn);
    }
    double a = 1e300, b = -1e300;
    for (auto& z : dl) {
      z = ds * n(rng) + 0.3 * shift;
      a = std::min(a, z);
      b = std::max(b, z);
    }
    std::vector<double> full(d, 0.0), mac(d, 0.0);
    double zf = 0, zm = 0, zr = 0;
    for (int t = 0; t < np + nr; ++t) {
      const double wf = std::exp(x[static_cast<size_t>(t)]);
      const double wm =
          t < np ? std::exp(x[static_cast<size_t>(t)] - dl[static_cast<size_t>(t)]) : wf;
      zf += wf;
      zm += wm;
      if (t >= np) zr += wf;
      for (int i = 0; i < d; ++i) {
        full[static_cast<size_t>(i)] += wf * v[static_cast<size_t>(t)][static_cast<size_t>(i)];
        mac[static_cast<size_t>(i)] += wm * v[static_cast<size_t>(t)][static_cast<size_t>(i)];
      }
    }
    double err2 = 0;
    for (int i = 0; i < d; ++i) {
      const double e = mac[static_cast<size_t>(i)] / zm - full[static_cast<size_t>(i)] / zf;
      err2 += e * e;
    }
    const BoundInputs in{a, b, zr / zf, vmax, vsum / np};
    const double B = drift_bound(in);
    BOOST_TEST(std::sqrt(err2) <= B * (1 + 1e-12) + 1e-15);
    worst = std::max(worst, std::sqrt(err2) / B);
  }
  BOOST_TEST(worst > 0.1);  // and the bound is not vacuous
}

BOOST_AUTO_TEST_CASE(bound_holds_on_every_hit_of_a_run) {
  // Through the real stepper (FP64, full-precision storage: rounding far below the bound),
  // against exact full attention: every hit's error is within B.
  const int64_t T = 240, P = 48, S = T - P;
  auto l = test::random_layer(T, 4, 2, 64, 3, 0.5);
  for (int64_t t = 1; t < T; ++t)
    for (int64_t h = 0; h < 4; ++h)
      if ((t + h) % 4 != 0) {
        std::vector<float> q(l.q_pre_at(t - 1, h), l.q_pre_at(t - 1, h) + 64);
        q[static_cast<size_t>(t % 64)] += 0.25f;
        test::set_q_pre(l, t, h, q.data());
      }
  const auto spec = spec_for(l, P, S, MacParams{0.45, 32, 8, 0, 0});
  const auto exact = ExactCache::compute(l, test::default_scale(64), P, S, false, "t");
  const auto r = execute_run(l, test::default_scale(64), spec, exact);
  int64_t checked = 0;
  for (size_t k = 0; k < r.hit.size(); ++k) {
    if (!r.hit[k]) {
      BOOST_TEST(std::isnan(r.bound[k]));
      BOOST_TEST(r.rel_l2[k] < 1e-12);  // a miss is exact full attention
      continue;
    }
    ++checked;
    BOOST_TEST(r.rho[k] >= 0.0);
    BOOST_TEST(r.rho[k] <= 1.0);
    BOOST_TEST(r.delta_min[k] <= r.delta_max[k]);
    BOOST_TEST(r.abs_l2[k] <= r.bound[k] * (1 + 1e-9) + 1e-12);
  }
  BOOST_TEST(checked > S);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(resume)

BOOST_AUTO_TEST_CASE(rerun_computes_only_missing_runs) {
  ScratchDir dir;
  ref::Trace tr;
  tr.meta.head_dim = 64;
  tr.meta.num_q_heads = 4;
  tr.meta.num_kv_heads = 2;
  tr.meta.num_layers = 1;
  tr.meta.softmax_scale = test::default_scale(64);
  tr.meta.source = "test_study random layer seed 9";
  tr.layers.push_back(test::random_layer(160, 4, 2, 64, 9));
  const auto trace = dir.path("t.h5");
  io::write_trace(trace, tr);

  SweepConfig cfg;
  cfg.traces = {trace};
  cfg.taus = {0.1, 0.6};
  cfg.tails = {8};
  cfg.rings = {16};
  cfg.variants = {"split", "downdate"};
  cfg.gen_min = 0;
  cfg.prefill = 96;
  cfg.steps = 40;
  cfg.progress = false;
  cfg.threads = 2;
  cfg.out_dir = dir.path("out");

  const auto first = run_sweep(cfg);
  BOOST_TEST(first.computed.size() == 4u);
  BOOST_TEST(first.skipped.empty());
  const auto again = run_sweep(cfg);
  BOOST_TEST(again.computed.empty());
  BOOST_TEST(again.skipped.size() == 4u);

  // "Interrupt": one run file deleted, one cut short (a partial file), and a stray temporary
  // file of an interrupted write left behind.
  const std::string lost = first.computed[1], cut = first.computed[2];
  const auto runs = fs::path(cfg.out_dir) / "runs";
  fs::remove(runs / (lost + ".h5"));
  fs::resize_file(runs / (cut + ".h5"), fs::file_size(runs / (cut + ".h5")) / 2);
  // A temporary of a process that no longer runs (pids stay below 2^22): the resume removes it.
  const std::string mine = io::temporary_name((runs / (first.computed[3] + ".h5")).string());
  const std::string stale = mine.substr(0, mine.rfind('.') + 1) + "999999999";
  std::ofstream(stale) << "partial";
  const auto resumed = run_sweep(cfg);
  const std::set<std::string> redone(resumed.computed.begin(), resumed.computed.end());
  BOOST_TEST(redone == (std::set<std::string>{lost, cut}));
  BOOST_TEST(resumed.skipped.size() == 2u);
  BOOST_TEST(!fs::exists(stale));

  // A changed configuration is a new run; the old ones stay.
  cfg.taus = {0.1, 0.6, 0.9};
  const auto grown = run_sweep(cfg);
  BOOST_TEST(grown.computed.size() == 2u);
  BOOST_TEST(grown.skipped.size() == 4u);

  // The tables list every run of the sweep.
  std::ifstream f(fs::path(cfg.out_dir) / "runs.csv");
  int64_t lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  BOOST_TEST(lines == 1 + 6);
  BOOST_TEST(fs::exists(fs::path(cfg.out_dir) / "study.h5"));
  const auto rr = read_run((runs / (lost + ".h5")).string());
  BOOST_TEST(rr.spec.hash() == lost);

  // Policies: new runs whose files carry K and N back; a bad value stops the sweep before any
  // run is written.
  cfg.taus = {0.6};
  cfg.variants = {"split"};
  cfg.depth_cap = 1;
  cfg.refresh = 8;
  const auto pol = run_sweep(cfg);
  BOOST_TEST(pol.computed.size() == 1u);
  const auto rp = read_run((runs / (pol.computed[0] + ".h5")).string());
  BOOST_TEST(rp.spec.params.depth_cap == 1);
  BOOST_TEST(rp.spec.params.refresh == 8);
  BOOST_TEST(rp.spec.hash() == pol.computed[0]);
  const auto files = std::distance(fs::directory_iterator(runs), fs::directory_iterator());
  cfg.depth_cap = -2;
  BOOST_CHECK_THROW(run_sweep(cfg), std::exception);
  cfg.depth_cap = 1;
  cfg.refresh = -1;
  BOOST_CHECK_THROW(run_sweep(cfg), std::exception);
  BOOST_TEST(std::distance(fs::directory_iterator(runs), fs::directory_iterator()) == files);
}

BOOST_AUTO_TEST_CASE(a_layer_tau_table_gives_each_layer_its_own_tau) {
  ScratchDir dir;
  ref::Trace tr;
  tr.meta.head_dim = 64;
  tr.meta.num_q_heads = 4;
  tr.meta.num_kv_heads = 2;
  tr.meta.num_layers = 2;
  tr.meta.softmax_scale = test::default_scale(64);
  tr.meta.source = "test_study random layers seeds 11, 12";
  tr.layers.push_back(test::random_layer(120, 4, 2, 64, 11));
  tr.layers.push_back(test::random_layer(120, 4, 2, 64, 12));
  const auto trace = dir.path("t.h5");
  io::write_trace(trace, tr);

  SweepConfig cfg;
  cfg.traces = {trace};
  cfg.taus = {0.1, 0.6};
  cfg.layer_tau = parse_layer_tau({"1=0.9"});
  cfg.tails = {8};
  cfg.rings = {16};
  cfg.gen_min = 0;
  cfg.prefill = 80;
  cfg.steps = 24;
  cfg.progress = false;
  cfg.threads = 2;
  cfg.out_dir = dir.path("out");
  // Layer 0 sweeps both taus, layer 1 runs at its own.
  const auto table = run_sweep(cfg);
  BOOST_TEST(table.computed.size() == 3u);
  std::multiset<std::pair<int64_t, double>> got;
  for (const auto& h : table.computed) {
    const auto rr = read_run((fs::path(cfg.out_dir) / "runs" / (h + ".h5")).string());
    got.insert({rr.spec.layer, rr.spec.params.tau});
  }
  BOOST_TEST((got == std::multiset<std::pair<int64_t, double>>{{0, 0.1}, {0, 0.6}, {1, 0.9}}));
  // The table's run is the run of a plain sweep of that layer at that tau: same key, no rerun.
  cfg.layer_tau.clear();
  cfg.layers = {1};
  cfg.taus = {0.9};
  const auto plain = run_sweep(cfg);
  BOOST_TEST(plain.computed.empty());
  BOOST_TEST(plain.skipped.size() == 1u);
  // A table naming a layer the sweep does not select stops it.
  cfg.layer_tau = {{0, 0.5}};
  BOOST_CHECK_THROW(run_sweep(cfg), std::exception);
}

BOOST_AUTO_TEST_CASE(layer_tau_entries_are_parsed_strictly) {
  const auto t = parse_layer_tau({"0=0.8", "29=0.45"});
  BOOST_TEST(t.size() == 2u);
  BOOST_TEST(t.at(0) == 0.8);
  BOOST_TEST(t.at(29) == 0.45);
  for (const char* bad : {"x", "1", "=0.5", "1=", "1=0.5x", "-1=0.5", "1=1.0", "1=-0.1"})
    BOOST_CHECK_THROW(parse_layer_tau({bad}), std::exception);
  BOOST_CHECK_THROW(parse_layer_tau({"2=0.5", "2=0.6"}), std::exception);
}

BOOST_AUTO_TEST_CASE(hash_covers_the_configuration_and_the_data) {
  const auto l = test::random_layer(64, 2, 1, 64, 1);
  auto a = spec_for(l, 32, 16, MacParams{0.45, 16, 8, 0, 0});
  auto b = a;
  BOOST_TEST(a.hash() == b.hash());
  b.params.tail = 9;
  BOOST_TEST(a.hash() != b.hash());
  b = a;
  b.variant = Variant::kDowndate;
  BOOST_TEST(a.hash() != b.hash());
  b = a;
  auto l2 = l;
  l2.v[5] = ref::round_bf16(l2.v[5] + 1.0f);
  b.fingerprint = layer_fingerprint(l2, 48);
  BOOST_TEST(a.hash() != b.hash());
  b = a;
  b.trace = "elsewhere.h5";  // same data under another name: the same run
  BOOST_TEST(a.hash() == b.hash());
  // Policies (semantics §3.3) are part of the identity only when set.
  BOOST_TEST(a.key().find("depth_cap") == std::string::npos);
  b = a;
  b.params.depth_cap = 0;
  BOOST_TEST(a.hash() != b.hash());
  b = a;
  b.params.refresh = 4;
  BOOST_TEST(a.hash() != b.hash());
}

BOOST_AUTO_TEST_CASE(policies_reach_the_runs) {
  // Walking queries: every step would hit the step before. K = 0 leaves no hit and every
  // output exact; K = 2 keeps chains at depth ≤ 2; N = 4 refreshes each head once per 4.
  const int64_t T = 200, P = 48, S = T - P;
  auto l = test::random_layer(T, 4, 2, 64, 5);
  for (int64_t t = P; t < T; ++t)
    for (int64_t h = 0; h < 4; ++h) {
      std::vector<float> q(l.q_pre_at(t - 1, h), l.q_pre_at(t - 1, h) + 64);
      q[static_cast<size_t>(t % 64)] += 0.25f;
      test::set_q_pre(l, t, h, q.data());
    }
  const auto exact = ExactCache::compute(l, test::default_scale(64), P, S, false, "t");
  auto run_with = [&](int64_t K, int64_t N) {
    MacParams p{0.45, 32, 8, 0, 0};
    p.depth_cap = K;
    p.refresh = N;
    return execute_run(l, test::default_scale(64), spec_for(l, P, S, p), exact);
  };
  const auto none = run_with(0, 0);
  for (size_t k = 0; k < none.hit.size(); ++k) {
    BOOST_TEST(!none.hit[k]);
    BOOST_TEST(none.rel_l2[k] < 1e-5);  // FP32 exact attention
  }
  const auto capped = run_with(2, 0);
  int64_t hits = 0;
  for (size_t k = 0; k < capped.hit.size(); ++k) {
    BOOST_TEST(capped.depth[k] <= 2);
    hits += capped.hit[k];
  }
  BOOST_TEST(hits > S);
  const auto refreshed = run_with(-1, 4);
  int64_t rhits = 0;
  for (size_t k = 0; k < refreshed.hit.size(); ++k) rhits += refreshed.hit[k];
  BOOST_TEST(rhits <= 4 * S * 3 / 4 + 4);  // at least one step in four misses per head
  BOOST_TEST(rhits > S);
}

BOOST_AUTO_TEST_SUITE_END()
