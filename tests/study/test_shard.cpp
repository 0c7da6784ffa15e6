// test_shard: splitting a mac-study sweep into shards (tools/mac-study/src/shard.cpp) and the
// sharded sweep and its merge (run_sweep with shard_count / merge_shards) on a trace file.
#include <boost/test/unit_test.hpp>

#include "mac/io/trace_io.hpp"
#include "mac/study/shard.hpp"
#include "mac/study/study.hpp"
#include "test_layers.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace mac;
using namespace mac::study;

BOOST_AUTO_TEST_SUITE(shard)

BOOST_AUTO_TEST_CASE(parse_accepts_k_of_n_only) {
  BOOST_TEST(parse_shard("0/1").count == 1);
  const auto s = parse_shard("2/3");
  BOOST_TEST((s.index == 2 && s.count == 3 && s.text() == "2/3"));
  for (const std::string bad : {"1x/2", "3/2", "0/0", "", "1", "1/", "/2", "-1/2", " 1/2", "1/2/3",
                                "+1/2", "1/99999999999999999999"}) {
    try {
      parse_shard(bad);
      BOOST_ERROR("--shard '" << bad << "' was accepted");
    } catch (const InputError& e) {
      BOOST_TEST(std::string(e.what()).find("--shard '" + bad + "'") != std::string::npos,
                 e.what());
    }
  }
  BOOST_TEST(parse_shard_count("12") == 12);
  for (const std::string bad : {"0", "x", "-2", "2.0", ""})
    BOOST_CHECK_THROW(parse_shard_count(bad), InputError);
}

BOOST_AUTO_TEST_CASE(every_item_in_one_shard_and_loads_balanced) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(1.0, 100.0);
  for (int64_t n : {1, 2, 3, 7, 40}) {
    std::vector<double> cost(23);
    for (auto& c : cost) c = u(rng);
    const auto shard = deal_by_cost(cost, n);
    BOOST_TEST(shard == deal_by_cost(cost, n));  // deterministic
    BOOST_REQUIRE(shard.size() == cost.size());
    std::vector<double> load(static_cast<size_t>(n), 0.0);
    for (size_t i = 0; i < cost.size(); ++i) {
      BOOST_REQUIRE((shard[i] >= 0 && shard[i] < n));
      load[static_cast<size_t>(shard[i])] += cost[i];
    }
    // Greedy least-loaded assignment: the fullest shard got its last item while it was the
    // emptiest (at most the mean), so it exceeds the mean by at most one item's cost.
    const double mean = std::accumulate(cost.begin(), cost.end(), 0.0) / static_cast<double>(n);
    const double biggest = *std::max_element(cost.begin(), cost.end());
    BOOST_TEST(*std::max_element(load.begin(), load.end()) <= mean + biggest);
  }
  // Equal costs: dealt round robin, shard sizes differ by at most one.
  const auto even = deal_by_cost(std::vector<double>(10, 1.0), 4);
  for (int64_t k = 0; k < 4; ++k) {
    const auto c = std::count(even.begin(), even.end(), k);
    BOOST_TEST((c == 2 || c == 3));
  }
  BOOST_CHECK_THROW(deal_by_cost({1.0}, 0), InputError);
}

BOOST_AUTO_TEST_CASE(shards_partition_the_sweep_and_the_merge_checks_them) {
  const fs::path dir = fs::temp_directory_path() / ("mac_test_shard_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ref::Trace tr;  // two layers, Hq 4, Hkv 2, D 64
  tr.meta = ref::TraceMeta{64,
                           4,
                           2,
                           2,
                           test::default_scale(64),
                           10000,
                           ref::RopeStyle::kNeox,
                           "test_shard random layers seeds 3, 4"};
  tr.layers = {test::random_layer(96, 4, 2, 64, 3), test::random_layer(96, 4, 2, 64, 4)};
  io::write_trace((dir / "t.h5").string(), tr);

  SweepConfig cfg;
  cfg.traces = {(dir / "t.h5").string()};
  cfg.taus = {0.1, 0.6};
  cfg.tails = {8};
  cfg.rings = {8, 16};
  cfg.gen_min = 0;
  cfg.prefill = 64;
  cfg.progress = false;
  cfg.threads = 1;
  cfg.out_dir = (dir / "whole").string();
  const auto whole = run_sweep(cfg);  // 2 layers x 2 tau x 2 rings
  BOOST_REQUIRE(whole.computed.size() == 8u);

  cfg.out_dir = (dir / "sharded").string();
  cfg.shard_count = 3;
  std::multiset<std::string> computed;
  for (int64_t k : {0, 2}) {
    cfg.shard_index = k;
    const auto rep = run_sweep(cfg);
    BOOST_TEST(rep.planned == 8);
    BOOST_TEST(rep.in_shard == static_cast<int64_t>(rep.computed.size()));
    computed.insert(rep.computed.begin(), rep.computed.end());
  }
  BOOST_TEST(!fs::exists(dir / "sharded" / "runs.csv"));  // shards write no tables
  cfg.shard_index = 0;
  cfg.shard_count = 1;
  cfg.merge_shards = 3;
  try {
    run_sweep(cfg);
    BOOST_ERROR("the merge went ahead with shard 1/3 missing");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("shard 1/3 (") != std::string::npos, e.what());
    BOOST_TEST(std::string(e.what()).find("shard 0/3") == std::string::npos, e.what());
  }
  BOOST_TEST(!fs::exists(dir / "sharded" / "runs.csv"));

  cfg.merge_shards = 0;
  cfg.shard_count = 3;
  cfg.shard_index = 1;
  const auto last = run_sweep(cfg);
  computed.insert(last.computed.begin(), last.computed.end());
  // Each run of the whole sweep computed by exactly one shard.
  BOOST_TEST(computed == std::multiset<std::string>(whole.computed.begin(), whole.computed.end()));
  cfg.shard_count = 1;
  cfg.shard_index = 0;
  cfg.merge_shards = 3;
  const auto merged = run_sweep(cfg);
  BOOST_TEST(merged.computed.empty());
  BOOST_TEST(merged.skipped.size() == 8u);
  BOOST_TEST(fs::exists(dir / "sharded" / "runs.csv"));
  for (const auto& h : whole.computed) {
    const auto a = read_run((dir / "whole" / "runs" / (h + ".h5")).string());
    const auto b = read_run((dir / "sharded" / "runs" / (h + ".h5")).string());
    BOOST_TEST(a.hit == b.hit);
    BOOST_TEST(a.depth == b.depth);
    BOOST_TEST(a.rel_l2 == b.rel_l2);  // the same arithmetic in another process: bit for bit
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
