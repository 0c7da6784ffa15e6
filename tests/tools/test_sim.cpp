// The simulator against its golden run dump (data/golden/synth_small_run.h5), and the
// command-line contract of mac-sim: unknown flags and bad values are errors naming the
// value, and a failed run leaves no output file.
#include "mac/io/run_dump.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/tools/simulate.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

const std::string kSrc = MAC_SOURCE_DIR;
const std::string kTrace = kSrc + "/data/golden/synth_small.h5";
const std::string kGoldenRun = kSrc + "/data/golden/synth_small_run.h5";

struct Run {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Run run_sim(const std::string& args) {
  const std::string log =
      fs::temp_directory_path() / ("mac_sim_test_" + std::to_string(::getpid()) + ".log");
  const std::string cmd = std::string(MAC_SIM_EXE) + " --quiet " + args + " > " + log + " 2>&1";
  Run r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  r.out = ss.str();
  fs::remove(log);
  return r;
}

fs::path scratch_dir() {
  const auto d = fs::temp_directory_path() / ("mac_tools_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(simulator)

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

BOOST_AUTO_TEST_CASE(json_and_dump_are_written_whole) {
  const auto dir = scratch_dir();
  const auto json = (dir / "s.json").string(), dump = (dir / "r.h5").string();
  const auto r = run_sim("--trace " + kTrace +
                         " --layer 1 --prefill 300 --steps 20 --gen-min 0 --ring 64 --tail 16 "
                         "--json " +
                         json + " --dump " + dump);
  BOOST_TEST_REQUIRE(r.status == 0, r.out);
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  for (const char* key :
       {"\"hit_rate\"", "\"kv_read_fraction\"", "\"rel_l2_max\"", "\"tau\"", "\"layers\""})
    BOOST_TEST(ss.str().find(key) != std::string::npos, key);
  const auto d = mac::io::read_run_dump(dump);
  BOOST_TEST(d.steps == 20);
  BOOST_TEST(d.layer == 1);
  BOOST_TEST(d.position.front() == 300);
  for (const auto& e : fs::directory_iterator(dir))
    BOOST_TEST(e.path().string().find(".tmp.") == std::string::npos, e.path().string());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_value_and_writes_nothing) {
  const auto dir = scratch_dir();
  const auto json = (dir / "never.json").string();
  const std::string base = "--trace " + kTrace + " --gen-min 0 --json " + json + " ";
  struct Bad {
    std::string args, needle;
  };
  const Bad cases[] = {
      {"--frobnicate 3", "frobnicate"},
      {"--tau 1.5", "tau = 1.5"},
      {"--tau nan", "tau"},
      {"--ring 0", "ring M = 0"},
      {"--tail -3", "tail r = -3"},
      {"--sinks -1", "sinks F = -1"},
      {"--variant sideways", "variant 'sideways'"},
      {"--precision fp16", "precision 'fp16'"},
      {"--storage bf8", "state storage 'bf8'"},
      {"--layer 7", "--layer 7"},
      {"--prefill 384", "prefill P = 384"},
      {"--prefill 300 --steps 200", "steps = 200"},
      {"--explain --explain-head 9", "--explain-head 9"},
      {"--dump /nonexistent-dir/x.h5 --layer 0", "/nonexistent-dir"},
  };
  for (const auto& c : cases) {
    const bool has_steps = c.args.find("--steps") != std::string::npos;
    const auto r = run_sim(base + c.args + (has_steps ? "" : " --steps 5"));
    BOOST_TEST(r.status != 0, c.args);
    BOOST_TEST(r.out.find(c.needle) != std::string::npos, c.args << " -> " << r.out);
    BOOST_TEST(!fs::exists(json), c.args);
  }
  const auto missing = run_sim("--trace " + (dir / "missing.h5").string());
  BOOST_TEST(missing.status != 0);
  BOOST_TEST(missing.out.find("missing.h5") != std::string::npos, missing.out);
  BOOST_TEST(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(explain_shows_every_stage_of_a_hit_and_a_miss) {
  const auto r = run_sim("--trace " + kTrace +
                         " --layer 0 --prefill 256 --steps 64 --gen-min 0 --ring 128 --tail 32 "
                         "--explain --explain-head 1");
  BOOST_TEST_REQUIRE(r.status == 0, r.out);
  for (const char* stage : {"1 eligible", "2 match", "3 amend", "4 cache write", "5 complete",
                            "HIT", "MISS", "keys read", "vs exact full attention"})
    BOOST_TEST(r.out.find(stage) != std::string::npos, stage);
}

BOOST_AUTO_TEST_SUITE_END()
