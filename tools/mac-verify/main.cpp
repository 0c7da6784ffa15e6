// mac-verify: certifies a MAC decode implementation against the 941-case matrix.
//
//   mac-verify --list                         one line per case (header on stderr)
//   mac-verify [--mode cpu|gpu|model] [--subset smoke|all|FAMILY] [--case ID,...]
//              [--shard k/N] [--devices 0,1,...] [--out REPORT.h5]
//   mac-verify --replay mac-verify-case123.h5  (replays one failed case)
//   mac-verify --merge a.h5 b.h5 ... --out all.h5
//   mac-verify --impl plugin:PATH.so [...]     an implementation under test built against
//                                              verification/include/mac/verify/plugin_abi.h
//   mac-verify --export DIR [--caps FILE]      the file protocol: inputs out ...
//   mac-verify --grade DIR                     ... and the outputs a program wrote graded
//
// Exit status (docs/cli.md): 0 PASS (every applicable case ran and passed); 1 a case failed
// or erred; 2 bad usage or input; 3 INCOMPLETE (a case was skipped by --time-limit,
// --max-cost or --max-context, or none was applicable); 4 a write failed; 5 an internal
// error; 77 GPU mode without a CUDA device (skipped).
#include "mac/cli/cli.hpp"
#include "mac/cuda/mac_cuda.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/tools/progress.hpp"
#include "mac/verify/check.hpp"
#include "mac/verify/cuda_impl.hpp"
#include "mac/verify/file_protocol.hpp"
#include "mac/verify/plugin.hpp"
#include "mac/verify/report.hpp"
#include "mac/verify/sha256.hpp"

#include "build_info.hpp"

#include <omp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

using namespace mac;
using namespace mac::verify;

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

/*! `t` as a whole decimal integer in [0, n), or an InputError naming `flag` and `what`. */
int parse_index(const std::string& t, const std::string& flag, const std::string& what, int64_t n) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  require(!t.empty() && ec == std::errc() && end == t.data() + t.size(), flag, ": '", t, "' in '",
          what, "' is not a non-negative integer");
  require(v >= 0 && v < n, flag, ": ", v, " in '", what, "' is outside [0, ", n - 1, "]");
  return static_cast<int>(v);
}

/*! A list of ids, e.g. "3,7,100-102" (ranges inclusive), each in [0, n): every token a whole
 *  integer or A-B with A <= B, both ends checked before the range is expanded, and no id
 *  twice (a report holds each case once). InputError naming `flag` and the token. */
std::vector<int> parse_ids(const std::string& s, const std::string& flag, int64_t n) {
  std::vector<int> ids;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  auto add = [&](int id) {
    require(!seen[static_cast<size_t>(id)], flag, ": ", id, " is given twice in '", s, "'");
    seen[static_cast<size_t>(id)] = true;
    ids.push_back(id);
  };
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string t = s.substr(at, comma - at);
    at = comma + 1;
    const auto dash = t.find('-', 1);
    if (dash == std::string::npos) {
      add(parse_index(t, flag, s, n));
      continue;
    }
    const int a = parse_index(t.substr(0, dash), flag, s, n);
    const int b = parse_index(t.substr(dash + 1), flag, s, n);
    require(a <= b, flag, ": range '", t, "' is not A-B with A <= B");
    for (int k = a; k <= b; ++k) add(k);
  }
  return ids;
}

/*! --shard k/N: two whole integers, 1 <= N <= 65536 and 0 <= k < N. */
std::pair<int, int> parse_shard(const std::string& shard) {
  const auto slash = shard.find('/');
  require(slash != std::string::npos, "--shard: '", shard, "' is not k/N");
  const int n = parse_index(shard.substr(slash + 1), "--shard", shard, 65537);
  require(n >= 1, "--shard: N = 0 in '", shard, "' (N is at least 1)");
  return {parse_index(shard.substr(0, slash), "--shard", shard, n), n};
}

/*! Deterministic shard k of N: cases sorted by cost (descending, then id) are dealt to the
 *  least-loaded shard, so shards take about equal time. */
std::vector<CaseSpec> shard_slice(const std::vector<CaseSpec>& cases, int k, int N, bool gpu) {
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto cost = [&](size_t i) {
    return gpu ? cases[i].cost_expected() : cases[i].cost_reference() + cases[i].cost_expected();
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost(a) > cost(b); });
  std::vector<double> load(static_cast<size_t>(N), 0.0);
  std::vector<CaseSpec> out;
  for (size_t i : order) {
    const size_t s = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[s] += cost(i);
    if (static_cast<int>(s) == k) out.push_back(cases[i]);
  }
  std::sort(out.begin(), out.end(),
            [](const CaseSpec& a, const CaseSpec& b) { return a.id < b.id; });
  return out;
}

/*! The machine and build a certificate was produced on: CPU model, compiler and flags. */
std::string environment() {
  std::string cpu = "unknown";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  std::string driver = "none";
  std::ifstream nv("/proc/driver/nvidia/version");
  if (nv.good()) std::getline(nv, driver);
  return msg("cpu: ", cpu, " (", std::thread::hardware_concurrency(), " threads)\n",
             "gpu: ", cuda_available() ? cuda::device_description() : std::string("none"), "\n",
             "nvidia driver: ", driver, "\n", "cuda: ", cuda_versions(), "\n",
             "compiler: ", __VERSION__, "\n", "flags: ", MAC_VERIFY_CXX_FLAGS, "\n");
}

/*! A per-run nonce: 8 bytes from the kernel's random source. Recorded in the report and in
 *  every replay command, so the run stays reproducible. */
uint64_t draw_nonce() {
  uint64_t n = 0;
  std::ifstream f("/dev/urandom", std::ios::binary);
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  require(f.good(), "cannot read /dev/urandom for the run's nonce (give one with --nonce)");
  return n == 0 ? 1 : n;
}

/*! The CUDA plugin of this build (plugins/cuda), beside the program or where CMake built it. */
std::string cuda_plugin_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {exe.parent_path().parent_path() / "plugins" / "mac_plugin_cuda.so",
                            fs::path(MAC_VERIFY_CUDA_PLUGIN)})
    if (!p.empty() && fs::exists(p)) return p.string();
  return {};
}

/*! The certificate's name beside a report: REPORT.h5 → REPORT.md. */
std::string certificate_path(const std::string& report) {
  return std::filesystem::path(report).replace_extension(".md").string();
}

/*! The commit this mac-verify was built from and the tree's state then ("… (clean at build
 *  time)"), as build_info.cmake captured them when it was last built. */
std::string driver_commit() {
  return msg(build::kGitCommit, " (", build::kGitTree, " at build time)");
}

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // The plugin loader's worker process (plugin.hpp): not an option a user gives.
  if (argc == 3 && std::string(argv[1]) == "--plugin-worker")
    return plugin_worker_main(std::atoi(argv[2]));
  CLI::App app{"mac-verify: certify a MAC decode implementation against the 941-case matrix"};
  bool list = false, quiet = false, no_summary = false, production = false;
  std::string mode, subset = "all", case_ids, shard = "0/1", devices, out = "mac-verify-report.h5",
                    fail_dir, replay, fault = "none", matrix_file;
  std::vector<std::string> merge;
  double max_cost = 3e9;
  int64_t max_context = 0;
  int jobs_per_device = 1;
  double time_limit = 0;
  int max_repro = 20;
  std::string impl_spec, nonce_arg, export_dir, grade_dir, outputs_dir, caps_file;
  double case_timeout = 600, load_timeout = 300;
  int export_case = -1, trials = 1;
  app.add_flag("--list", list, "print the matrix, one case per line (column header on stderr)");
  app.add_option("--mode", mode,
                 "cpu (FP32 reference vs FP64 oracle), gpu (CUDA kernels), model (FP64 model with "
                 "--fault); default gpu if a device is present, else cpu")
      ->check(CLI::IsMember({"cpu", "gpu", "model"}));
  app.add_option("--fault", fault,
                 "model mode: planted fault (none, tie-newer, band-late, threshold-inclusive, "
                 "write-before-read, no-ready-gate, second-best, tail-short, downdate-entry, "
                 "gen-min-off-by-one)");
  app.add_option(
      "--subset", subset,
      "all | smoke | a family name (grid, long, lag, batch, wrap, tie, threshold, "
      "small, gen_min, not_ready, graph_chain, extreme, params, d256, random, policy, gate)");
  app.add_option("--case", case_ids, "only these case ids (e.g. 12 or 3,7,100-110)");
  app.add_option("--replay", replay,
                 "replay the case stored in a failure file (mac-verify-case<ID>.h5)");
  app.add_option("--shard", shard,
                 "run shard k of N (k/N, 0-based), a deterministic cost-balanced slice");
  app.add_option("--devices", devices,
                 "GPU mode: spread shards over these device ordinals (e.g. 0,1,2,3 or all), one "
                 "process per device (x --jobs-per-device); reports are merged");
  using mac::cli::range;
  app.add_option("--jobs-per-device", jobs_per_device, "processes per device with --devices")
      ->check(range(1, 64));
  app.add_option("--max-cost", max_cost,
                 "CPU/model mode: skip cases whose estimated reference cost (key x head "
                 "evaluations) exceeds this (0 = no cap)")
      ->check(range(0.0, 1e300));
  app.add_option("--max-context", max_context,
                 "skip cases whose largest kv_len exceeds this (0 = no cap)")
      ->check(range<int64_t>(0, kMaxTokens));
  app.add_option(
         "--time-limit", time_limit,
         "stop starting cases after this many seconds; the rest are reported as skipped (0 = none)")
      ->check(range(0.0, 1e9));
  app.add_option("--max-repro", max_repro,
                 "write reproducer files for at most this many failing cases per process (the "
                 "replay command is printed for all)")
      ->check(range(0, 1 << 20));
  app.add_option("--out", out, "report file (HDF5, schema mac-verify)");
  app.add_option("--fail-dir", fail_dir,
                 "where failed cases' reproducer files go (default: the report's directory)");
  app.add_option("--merge", merge, "merge these shard reports into --out")->expected(1, -1);
  app.add_option("--matrix", matrix_file,
                 "use this matrix file instead of the built-in one (same format)");
  app.add_flag("--production-storage", production,
               "cpu mode: run the FP32 reference with the production ring layout (BF16 o, FP32 L) "
               "against an expected evaluation that stores entries the same way, with the GPU "
               "tolerances (a dry run of the GPU comparison)");
  app.add_option("--impl", impl_spec,
                 "plugin:PATH.so: the implementation is a plugin (plugin_abi.h) run in a worker "
                 "process; inprocess:PATH.so: the same loaded into mac-verify itself (debugging: "
                 "no crash isolation, no timeout)");
  app.add_option("--case-timeout", case_timeout,
                 "plugin: seconds a case may take in the plugin before it is killed and the case "
                 "is an ERROR (0 = none)")
      ->check(range(0.0, 1e9));
  app.add_option("--load-timeout", load_timeout,
                 "plugin: seconds the worker may take to load the plugin (dlopen, "
                 "macv_abi_version, macv_query), at start and after every restart (0 = none)")
      ->check(range(0.0, 1e9));
  app.add_option("--nonce", nonce_arg,
                 "mixed into every case's seed (hex 0x... or decimal; 0 = the matrix's seeds). "
                 "Default: drawn afresh for a plugin (--impl plugin:, --mode gpu) and --export, 0 "
                 "otherwise");
  app.add_option("--trials", trials,
                 "run every applicable case this many times, trial t with a nonce derived from "
                 "the run's and t (fresh inputs each time); a case passes only if every trial "
                 "does")
      ->check(range(1, 1 << 20));
  app.add_option("--export", export_dir,
                 "file protocol: write the selected cases' inputs to this directory");
  app.add_option("--export-case", export_case,
                 "file protocol: export this one case (to --export DIR, default "
                 "mac-verify-export-case<N>)")
      ->check(range(0, std::numeric_limits<int>::max()));
  app.add_option("--caps", caps_file,
                 "file protocol: the implementation's declared capabilities (key = value lines, "
                 "docs/verification.md); cases outside them are not exported (not applicable)");
  app.add_option("--grade", grade_dir,
                 "file protocol: grade the outputs written for the export in this directory");
  app.add_option("--outputs", outputs_dir, "--grade: the outputs' directory (default DIR/outputs)");
  app.add_flag("--quiet", quiet, "no progress line");
  app.add_flag("--no-summary", no_summary, "do not print the summary table");
  if (auto rc = mac::cli::parse(app, argc, argv, "mac-verify")) return *rc;

  return mac::cli::run("mac-verify", [&]() -> int {
    std::vector<CaseSpec> matrix;
    if (!matrix_file.empty()) {
      std::ifstream f(matrix_file);
      require(f.good(), "--matrix file '", matrix_file, "' cannot be read");
      std::stringstream ss;
      ss << f.rdbuf();
      matrix = parse_matrix(ss.str());
    } else {
      matrix = builtin_matrix();
    }
    const std::string matrix_sha = fnv1a_hex(matrix_file.empty() ? builtin_matrix_text() : "");

    if (list) {
      std::cerr << "#";
      for (size_t i = 0; i < matrix_columns().size(); ++i)
        std::cerr << (i ? "\t" : "") << matrix_columns()[i];
      std::cerr << "\n";
      for (const auto& c : matrix) std::cout << c.to_line() << "\n";
      return 0;
    }

    if (!merge.empty()) {
      // The output is checked before any input is read: writable, and none of the inputs
      // (a merge onto its own shard would destroy it).
      for (const std::string& o : {out, certificate_path(out)}) {
        io::check_output(o, "--out");
        for (const auto& p : merge) io::refuse_if_same_file(o, {p, certificate_path(p)});
      }
      std::vector<Report> parts;
      for (const auto& p : merge) parts.push_back(read_report(p));
      Report r = merge_reports(parts);
      write_report(out, r);
      // One certificate for the whole: per-family counts over every shard's cases, each
      // failure with the replay command its shard recorded.
      io::write_text_file(certificate_path(out), certificate_markdown(r, {}, ""));
      if (!no_summary) std::cout << summary_table(r);
      std::cout << "merged " << merge.size() << " reports (" << r.cases.size() << " cases) into "
                << out << "\ncertificate: " << certificate_path(out) << "\n";
      return r.exit_code();
    }

    // The implementation under test: a built-in one (--mode), a plugin (--impl), or the outputs
    // of the file protocol (--grade); --export writes inputs and certifies nothing.
    const bool exporting = !export_dir.empty() || export_case >= 0;
    require(grade_dir.empty() || !exporting, "--grade and --export exclude each other");
    const bool user_plugin =
        impl_spec.rfind("plugin:", 0) == 0 || impl_spec.rfind("inprocess:", 0) == 0;
    require(impl_spec.empty() || user_plugin || impl_spec == "cuda-inprocess", "--impl '",
            impl_spec, "' is not plugin:PATH, inprocess:PATH or cuda-inprocess");
    if (impl_spec == "cuda-inprocess") mode = "gpu";
    if (mode.empty())
      mode = !grade_dir.empty() ? "file"
             : user_plugin      ? "plugin"
             : exporting        ? "export"
             : cuda_available() ? "gpu"
                                : "cpu";
    if (mode == "gpu" && !cuda_available()) {
      std::printf("SKIP: GPU mode needs a CUDA device (%s)\n", cuda::device_description().c_str());
      return 77;
    }
    if (mode == "gpu" && impl_spec.empty()) {
      // This project's CUDA kernels through the plugin ABI, as any kernel is certified.
      const std::string cuda_plugin = cuda_plugin_path();
      require(!cuda_plugin.empty(),
              "--mode gpu: the CUDA plugin (mac_plugin_cuda.so) was not built");
      impl_spec = "plugin:" + cuda_plugin;
    }
    // Whether the implementation is reached through the plugin ABI: a user's plugin, or this
    // project's CUDA kernels (--mode gpu). Such a run draws a fresh nonce: its inputs must be
    // unknown to the implementation before the run.
    const bool via_abi =
        impl_spec.rfind("plugin:", 0) == 0 || impl_spec.rfind("inprocess:", 0) == 0;
    require(trials == 1 || (grade_dir.empty() && !exporting), "--trials ", trials,
            ": the file protocol grades the one set of inputs an export "
            "holds (export once per trial instead)");
    const Fault f = parse_fault(fault);
    require(mode == "model" || f == Fault::kNone, "--fault needs --mode model");
    require(!production || mode == "cpu", "--production-storage needs --mode cpu");
    const auto [shard_k, shard_n] = parse_shard(shard);
    // The report and its certificate are checked before anything is computed: writable, and
    // no input of this run.
    if (!exporting)
      for (const std::string& o : {out, certificate_path(out)}) {
        io::check_output(o, "--out");
        io::refuse_if_same_file(o, {matrix_file, replay, caps_file});
      }

    // The run's nonce (with_nonce): given, taken from a replay file or an export, drawn afresh
    // for an implementation from outside the driver, else none.
    uint64_t nonce = 0;
    std::string nonce_source = "none";
    files::GradeSet grade_set;
    if (!grade_dir.empty()) {
      grade_set = files::read_grade_set(grade_dir, outputs_dir);
      require(grade_set.matrix_fnv1a == matrix_sha, "--grade: the export was made from matrix ",
              grade_set.matrix_fnv1a, ", this driver's is ", matrix_sha);
      nonce = grade_set.nonce;
      nonce_source = "export";
    } else if (!nonce_arg.empty()) {
      char* end = nullptr;
      nonce = std::strtoull(nonce_arg.c_str(), &end, 0);
      require(*end == 0, "--nonce '", nonce_arg, "' is not a number (0x... or decimal)");
      nonce_source = "given";
    } else if (!replay.empty()) {
      nonce = read_failure_nonce(replay);
      nonce_source = "replay";
    } else if (via_abi || exporting) {
      nonce = draw_nonce();
      nonce_source = "drawn";
    }

    // Select the cases.
    std::vector<CaseSpec> cases;
    std::string subset_name = subset;
    if (!replay.empty()) {
      cases.push_back(parse_case(read_failure_case_line(replay)));
      subset_name = "replay:" + replay;
    } else if (export_case >= 0) {
      require(export_case < static_cast<int>(matrix.size()), "--export-case ", export_case,
              " is outside 0..", matrix.size() - 1);
      cases.push_back(matrix[static_cast<size_t>(export_case)]);
      subset_name = msg("case:", export_case);
      if (export_dir.empty()) export_dir = msg("mac-verify-export-case", export_case);
    } else if (!grade_dir.empty()) {
      // The export's cases, or those of them named by --case.
      const auto ids = case_ids.empty()
                           ? std::vector<int>{}
                           : parse_ids(case_ids, "--case", static_cast<int64_t>(matrix.size()));
      for (const auto& c : grade_set.cases)
        if (ids.empty() || std::find(ids.begin(), ids.end(), c.id) != ids.end()) cases.push_back(c);
      subset_name =
          case_ids.empty() ? "export:" + grade_dir : "export:" + grade_dir + ":" + case_ids;
    } else if (!case_ids.empty()) {
      for (int id : parse_ids(case_ids, "--case", static_cast<int64_t>(matrix.size())))
        cases.push_back(matrix[static_cast<size_t>(id)]);
      subset_name = "case:" + case_ids;
    } else {
      bool known = subset == "all" || subset == "smoke";
      for (const auto& c : matrix) {
        known = known || c.family == subset;
        if (subset == "all" || (subset == "smoke" && c.smoke) || c.family == subset)
          cases.push_back(c);
      }
      require(known, "--subset '", subset, "' is not all, smoke or a family name");
    }
    bool gpu = mode == "gpu";

    if (exporting) {
      macv_caps caps = abi::caps_from_text("name = export\n");
      if (!caps_file.empty()) {
        std::ifstream cf(caps_file);
        require(cf.good(), "--caps file '", caps_file, "' cannot be read");
        std::stringstream ss;
        ss << cf.rdbuf();
        caps = abi::caps_from_text(ss.str());
      }
      const std::string bad = abi::validate_caps(caps);
      require(bad.empty(), "--caps '", caps_file, "': ", bad);
      const int n = files::export_cases(export_dir, cases, caps, nonce, matrix_sha, driver_commit(),
                                        join_args(argc, argv));
      std::printf("exported %d case(s) to %s (%zu selected, %zu not applicable), nonce %s\n", n,
                  export_dir.c_str(), cases.size(), cases.size() - static_cast<size_t>(n),
                  nonce_text(nonce).c_str());
      return 0;
    }

    // --devices: one child process per (device, job), then merge.
    if (!devices.empty()) {
      require(grade_dir.empty(), "--grade runs in one process (no --devices)");
      // In CPU/model mode the same machinery runs N processes (device ordinals unused).
      std::vector<int> devs;
      if (devices == "all") {
        const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
        int n = 0;
        if (cvd && *cvd) {
          n = 1;
          for (const char* p = cvd; *p; ++p) n += *p == ',';
        } else {
          n = static_cast<int>(std::thread::hardware_concurrency() > 0 ? 1 : 1);
          // Count devices through nvidia-style ordinals: probe 0..15 is not possible without
          // CUDA types here; `all` without CUDA_VISIBLE_DEVICES means device 0 only.
        }
        for (int i = 0; i < n; ++i) devs.push_back(i);
      } else {
        for (int d : parse_ids(devices, "--devices", 1024)) devs.push_back(d);
      }
      const int N = static_cast<int>(devs.size()) * jobs_per_device;
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      const std::string dir = std::filesystem::path(out).parent_path().string();
      std::vector<std::string> parts;
      std::vector<pid_t> pids;
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < N; ++k) {
        const int dev = devs[static_cast<size_t>(k) % devs.size()];
        const std::string part = (dir.empty() ? std::string(".") : dir) + "/" +
                                 std::filesystem::path(out).stem().string() +
                                 msg(".shard", k, "of", N, ".h5");
        parts.push_back(part);
        std::vector<std::string> args = {argv[0], "--shard", msg(k, "/", N),
                                         "--out", part,      "--no-summary"};
        if (mode != "plugin") args.insert(args.end(), {"--mode", mode});
        if (!replay.empty())
          args.insert(args.end(), {"--replay", replay});
        else if (!case_ids.empty())
          args.insert(args.end(), {"--case", case_ids});
        else
          args.insert(args.end(), {"--subset", subset});
        if (!fail_dir.empty()) args.insert(args.end(), {"--fail-dir", fail_dir});
        if (mode == "model") args.insert(args.end(), {"--fault", fault});
        if (!impl_spec.empty()) args.insert(args.end(), {"--impl", impl_spec});
        args.insert(args.end(), {"--trials", msg(trials)});
        args.insert(args.end(), {"--nonce", nonce_text(nonce), "--case-timeout", msg(case_timeout),
                                 "--load-timeout", msg(load_timeout)});
        if (production) args.push_back("--production-storage");
        if (!gpu) args.insert(args.end(), {"--max-cost", msg(max_cost)});
        if (!matrix_file.empty()) args.insert(args.end(), {"--matrix", matrix_file});
        if (max_context) args.insert(args.end(), {"--max-context", msg(max_context)});
        if (time_limit > 0) args.insert(args.end(), {"--time-limit", msg(time_limit)});
        args.insert(args.end(), {"--max-repro", msg(max_repro)});
        if (quiet || k > 0) args.push_back("--quiet");  // one progress line is enough
        const pid_t parent = getpid();
        const pid_t pid = fork();
        require(pid >= 0, "fork failed");
        if (pid == 0) {
          // A killed parent (even SIGKILL) takes its shards with it; the check after prctl
          // covers a parent that died before it took effect.
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (getppid() != parent) _exit(2);
          setenv("CUDA_VISIBLE_DEVICES", msg(dev).c_str(), 1);
          setenv("OMP_NUM_THREADS", msg(std::max(1u, cores / static_cast<unsigned>(N))).c_str(), 1);
          std::vector<char*> cargs;
          for (auto& a : args) cargs.push_back(a.data());
          cargs.push_back(nullptr);
          execv("/proc/self/exe", cargs.data());
          std::perror("execv");
          _exit(2);
        }
        pids.push_back(pid);
      }
      // A shard that crashed (or wrote no report) must not take the others' results with it:
      // merge what exists, name what is missing, and fail.
      std::vector<Report> rs;
      int missing = 0;
      for (size_t k = 0; k < pids.size(); ++k) {
        int st = 0;
        waitpid(pids[k], &st, 0);
        const bool exited =
            WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1 || WEXITSTATUS(st) == 3);
        try {
          if (!exited)
            throw InputError(msg("exit status ", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                                 WIFSIGNALED(st) ? msg(", signal ", WTERMSIG(st)) : std::string()));
          rs.push_back(read_report(parts[k]));
        } catch (const std::exception& ex) {
          ++missing;
          std::fprintf(stderr,
                       "mac-verify: shard %zu/%d produced no report (%s); its cases are missing\n",
                       k, N, ex.what());
        }
      }
      require(!rs.empty(), "no shard produced a report");
      Report r = merge_reports(rs);
      r.meta.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.meta.command = join_args(argc, argv);
      // The shards were given the nonce; where it came from is this process's to say.
      r.meta.nonce_source = nonce_source;
      write_report(out, r);
      std::string cert = certificate_markdown(r, {}, "");
      if (missing)  // the verdict of the cases present cannot stand for the missing ones
        cert = msg("# mac-verify certificate: FAIL\n\n", missing, " of ", N,
                   " shards produced no report; their cases are missing below.\n",
                   cert.substr(cert.find('\n')), "\nRESULT: FAIL (", missing, " of ", N,
                   " shards produced no report)\n");
      io::write_text_file(certificate_path(out), cert);
      // The shards' reports and certificates are parts of this one.
      for (const auto& p : parts) {
        std::filesystem::remove(p);
        std::filesystem::remove(certificate_path(p));
      }
      if (!no_summary) std::cout << summary_table(r);
      if (missing)
        std::cout << "RESULT: FAIL (" << missing << " of " << N << " shards produced no report)\n";
      std::cout << "report: " << out << "\ncertificate: " << certificate_path(out) << "\n";
      return missing == 0 ? r.exit_code() : 1;
    }

    // Which implementation, its identity, and the limits it is held to.
    std::unique_ptr<Implementation> impl;
    RunOptions opt;
    opt.nonce = nonce;
    Report report;
    auto& meta = report.meta;
    if (!grade_set.outputs_dir.empty() && !grade_dir.empty()) {
      require(grade_set.outputs_found > 0, "--grade: no outputs in ", grade_set.outputs_dir);
      impl = files::make_file_impl(grade_set, grade_dir);
      opt.tol = abi::tolerances(grade_set.caps);
      opt.expected_storage = abi::expected_storage(grade_set.caps);
      opt.grading = abi::grading(grade_set.caps);
      meta.impl_sha256 = grade_set.outputs_sha256;
      meta.impl_declared = grade_set.declared_name + " " + grade_set.declared_version;
      meta.impl_caps = abi::caps_to_text(grade_set.caps);
    } else if (via_abi) {
      const auto colon = impl_spec.find(':');
      const std::string path = impl_spec.substr(colon + 1);
      require(std::filesystem::is_regular_file(path), "--impl: plugin file '", path,
              "' does not exist");
      auto channel = impl_spec.rfind("inprocess:", 0) == 0
                         ? make_local_channel(load_plugin(path))
                         : make_worker_channel(path, load_timeout);
      const macv_caps caps = channel->caps();
      gpu = caps.device == MACV_DEVICE_CUDA;
      meta.impl_sha256 = sha256_file(path);
      meta.impl_declared = msg(caps.name, " ", caps.version);
      meta.impl_caps = abi::caps_to_text(caps);
      meta.abi_version = MACV_ABI_VERSION;
      opt.tol = abi::tolerances(caps);
      opt.expected_storage = abi::expected_storage(caps);
      opt.grading = abi::grading(caps);
      impl = make_abi_impl(std::move(channel), caps.name,
                           gpu ? cuda::device_description() : std::string("cpu"), case_timeout);
    } else {
      if (gpu)
        impl = make_cuda_impl(0);  // --impl cuda-inprocess: the route before the plugin ABI
      else if (mode == "model")
        impl = make_model_impl(f);
      else
        impl = make_reference_impl(production ? StateStorage::kProduction : StateStorage::kFull);
      opt.tol = gpu || production ? Tolerances::gpu() : Tolerances::cpu();
      opt.expected_storage = gpu || production ? StateStorage::kProduction : StateStorage::kFull;
    }
    // The grader's and a GPU's cost is the expected evaluation; a CPU implementation's adds the
    // reference's (also the driver's prefill of a CPU plugin's ring).
    const bool cpu_cost = !gpu && mode != "file";
    cases = shard_slice(cases, shard_k, shard_n, !cpu_cost);
    meta.nonce = nonce;
    meta.nonce_source = nonce_source;
    meta.trials = trials;
    meta.grading = grading_text(opt.grading);
    // The build's commit is what the report certifies; MAC_VERIFY_COMMIT (for a build tree
    // without .git, e.g. a copied working tree) is recorded beside it as a declaration only.
    meta.git_commit = driver_commit();
    if (const char* declared = std::getenv("MAC_VERIFY_COMMIT")) meta.declared_commit = declared;
    meta.device = impl->device();
    meta.mode = mode;
    meta.impl = impl->name();
    meta.subset = subset_name;
    meta.shard = shard;
    meta.command = join_args(argc, argv);
    meta.created = utc_now();
    meta.matrix_sha = matrix_sha;
    meta.tol = opt.tol;
    meta.threads = omp_get_max_threads();
    if (fail_dir.empty()) fail_dir = std::filesystem::path(out).parent_path().string();
    if (fail_dir.empty()) fail_dir = ".";

    auto cost = [&](const CaseSpec& c) {
      return cpu_cost ? c.cost_reference() + c.cost_expected() : c.cost_expected();
    };
    double total = 0;
    for (const auto& c : cases) total += cost(c);
    const double unit = std::max(1.0, total / 1e6);
    tools::Progress progress(msg("mac-verify ", mode, " ", shard),
                             static_cast<int64_t>(total / unit), 5.0, !quiet);
    double done = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> replays;
    for (const auto& c : cases) {
      CaseResult res;
      uint64_t case_nonce = nonce;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (time_limit > 0 && elapsed > time_limit) {
        res.spec = c;
        res.status = CaseStatus::kSkip;
        res.message = msg("--time-limit ", time_limit, " s reached");
      } else if (max_context > 0 && c.max_kv_len() > max_context) {
        res.spec = c;
        res.status = CaseStatus::kSkip;
        res.message = msg("kv_len ", c.max_kv_len(), " above --max-context ", max_context);
      } else if (cpu_cost && max_cost > 0 && c.cost_reference() > max_cost) {
        res.spec = c;
        res.status = CaseStatus::kSkip;
        res.message =
            msg("estimated reference cost ", c.cost_reference(), " above --max-cost ", max_cost);
      } else {
        res = run_trials(c, *impl, opt, trials, &case_nonce);
      }
      if (res.status == CaseStatus::kFail || res.status == CaseStatus::kError) {
        const std::string path = fail_dir + msg("/mac-verify-case", c.id, ".h5");
        bool written = false;
        // The failing trial's nonce: its replay draws the same inputs.
        ReportMeta case_meta = meta;
        case_meta.nonce = case_nonce;
        if (static_cast<int>(replays.size()) < max_repro) {
          try {
            write_failure_file(path, res, case_meta, size_t(64) << 20);
            written = true;
          } catch (const std::exception& ex) {
            std::fprintf(stderr, "could not write %s: %s\n", path.c_str(), ex.what());
          }
        }
        const std::string base =
            mode == "file" ? msg("mac-verify --grade ", grade_dir)
            : user_plugin
                ? msg("mac-verify --impl ", impl_spec, " --nonce ", nonce_text(case_nonce))
                : msg("mac-verify --mode ", mode, mode == "model" ? " --fault " + fault : "",
                      case_nonce ? " --nonce " + nonce_text(case_nonce) : std::string());
        const std::string cmd =
            msg(base, " --case ", c.id,
                written ? msg("   (or: ", base, " --replay ", path, ")") : std::string());
        std::printf("[%s] %s\n    %s\n    replay: %s\n", to_string(res.status),
                    c.describe().c_str(), res.message.c_str(), cmd.c_str());
        std::fflush(stdout);
        replays.push_back(cmd);
        res.replay = cmd;
      }
      res.steps.clear();
      report.cases.push_back(std::move(res));
      done += cost(c);
      progress.update(static_cast<int64_t>(done / unit));
    }
    progress.finish();
    meta.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    meta.finished = utc_now();
    meta.environment = environment();
    write_report(out, report);
    io::write_text_file(certificate_path(out), certificate_markdown(report, replays, ""));
    if (!no_summary) std::cout << summary_table(report);
    std::cout << "report: " << out << "\ncertificate: " << certificate_path(out) << "\n";
    return report.exit_code();
  });
}
