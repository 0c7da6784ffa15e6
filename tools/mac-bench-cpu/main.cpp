/*! \file main.cpp
 *  \brief mac-bench-cpu: CPU cost of the FP64 oracle and of one simulated decode step.
 *
 *  1. Oracle full attention (mac::oracle::full_attention) of Hq heads over `context` keys:
 *     keys·heads per second, and the bandwidth reached counting the K/V bytes it reads as
 *     float32 (each KV head's rows once per step: 2·Hkv·context·D·4 bytes), against a
 *     streaming-read baseline over the same arrays measured in the same run.
 *  2. Simulator cost per decode step at that context: the reference stepper
 *     (mac::ref::DecodeStepper<float>, split, production storage) plus the oracle step
 *     (mac::oracle::MacOracle::step: MAC output for the stepper's decisions and exact full
 *     attention), and the extrapolation to a 4096-step simulation with prefill.
 *  Synthetic data: K, V, queries ~ N(0, 1) rounded to BF16, seeded. Random queries never
 *  match, so every head misses: the stepper's worst case (full context every step); the
 *  oracle step costs one pass over the keys either way.
 *  Timings: median, min and max over --reps repetitions (after one warm-up).
 *  Exit status and messages: docs/cli.md.
 */
#include "mac/cli/cli.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/oracle/oracle.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/ref/stepper.hpp"

#include <omp.h>
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  Stats s;
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

/*! \brief CPU seconds of this process (all threads): robust to other load on the machine. */
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

/*! \brief Wall-clock stats over reps (after one warm-up); `cpu` gets the CPU-second stats. */
template <typename F>
Stats time_reps(int reps, F&& f, Stats* cpu = nullptr) {
  f();  // warm-up (first touch, thread pool)
  std::vector<double> t, c;
  for (int i = 0; i < reps; ++i) {
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
    c.push_back(cpu_seconds() - c0);
  }
  if (cpu) *cpu = stats_of(c);
  return stats_of(t);
}

/*! \brief K, V over all tokens; queries only at positions ≥ q_from (the rest stay 0). */
mac::ref::LayerData make_layer(int64_t T, int64_t hq, int64_t hkv, int64_t d, int64_t q_from,
                               uint64_t seed) {
  mac::ref::LayerData l;
  l.resize(T, hq, hkv, d);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (auto& x : l.k) x = mac::ref::round_bf16(n01(rng));
  for (auto& x : l.v) x = mac::ref::round_bf16(n01(rng));
  for (size_t i = static_cast<size_t>(q_from * hq * d); i < l.q_pre.size(); ++i) {
    l.q_pre[i] = mac::ref::round_bf16(n01(rng));
    l.q_post[i] = mac::ref::round_bf16(n01(rng));
  }
  return l;
}

/*! \brief Streaming read of K and V (float sums, OpenMP): the bandwidth baseline. */
double stream_read(const mac::ref::LayerData& l) {
  const float* k = l.k.data();
  const float* v = l.v.data();
  const int64_t n = static_cast<int64_t>(l.k.size());
  double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (int64_t b = 0; b < n; b += 4096) {
    const int64_t e = std::min(n, b + 4096);
    // Eigen's vectorised reduction: the loop is bound by memory, not by add latency.
    total += Eigen::Map<const Eigen::ArrayXf>(k + b, e - b).sum() +
             Eigen::Map<const Eigen::ArrayXf>(v + b, e - b).sum();
  }
  return total;
}

struct Row {
  std::string name;
  Stats s;
  std::string unit;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mac-bench-cpu: FP64 oracle throughput and simulator cost per decode step"};
  int64_t hq = 32, hkv = 8, d = 128, context = 32768, steps = 2, ring = 16, target_steps = 4096;
  int reps = 5, threads = 0;
  uint64_t seed = 20261129;
  bool quick = false, no_sim = false;
  std::string csv;
  using mac::cli::range;
  // Every count is bounded so that no product of them overflows or asks for an absurd
  // allocation before the layer's own checked_product (mac::kMaxElements) sees it.
  app.add_option("--heads", hq, "query heads Hq")->check(range<int64_t>(1, mac::kMaxHeads));
  app.add_option("--kv-heads", hkv, "KV heads Hkv")->check(range<int64_t>(1, mac::kMaxHeads));
  app.add_option("--dim", d, "head dimension D")->check(mac::cli::head_dim());
  app.add_option("--context", context, "context length (keys per full attention)")
      ->check(range<int64_t>(2, int64_t{1} << 20));
  app.add_option("--reps", reps, "timed repetitions (median, min, max)")->check(range(1, 10000));
  app.add_option("--steps", steps, "decode steps timed per repetition for the simulator cost")
      ->check(range<int64_t>(1, int64_t{1} << 20));
  app.add_option("--ring", ring,
                 "ring M for the simulator part (prefill cost scales linearly in M)")
      ->check(range<int64_t>(1, int64_t{1} << 20));
  app.add_option("--target-steps", target_steps, "steps of the extrapolated simulation")
      ->check(range<int64_t>(1, mac::kMaxTokens));
  app.add_option("--threads", threads, "OpenMP threads (0: all cores)")
      ->check(range(0, mac::kMaxThreads));
  app.add_option("--seed", seed, "seed of the synthetic data");
  app.add_option("--csv", csv, "also write the results as CSV to this file");
  app.add_flag("--quick", quick, "small smoke run (Hq=8, Hkv=2, context 4096, 3 reps)");
  app.add_flag("--no-sim", no_sim, "skip the simulator part");
  if (auto rc = mac::cli::parse(app, argc, argv, "mac-bench-cpu")) return *rc;
  return mac::cli::run("mac-bench-cpu", [&] {
    if (quick) {
      hq = 8, hkv = 2, context = 4096, reps = 3, steps = 2, ring = 16;
    }
    mac::require(hq % hkv == 0, "--heads ", hq, " is not a multiple of --kv-heads ", hkv);
    if (!csv.empty()) mac::io::check_output(csv, "--csv");
    if (threads > 0) omp_set_num_threads(threads);
    const int nthreads = omp_get_max_threads();
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const int64_t prefill = context - steps * (reps + 1);
    mac::require(prefill >= ring, "--context ", context, " too short for ", steps * (reps + 1),
                 " steps after a ring of ", ring);

    std::printf(
        "mac-bench-cpu: Hq=%lld Hkv=%lld D=%lld context=%lld threads=%d reps=%d seed=%llu\n",
        static_cast<long long>(hq), static_cast<long long>(hkv), static_cast<long long>(d),
        static_cast<long long>(context), nthreads, reps, static_cast<unsigned long long>(seed));
    const auto t_gen = Clock::now();
    const auto layer = make_layer(context, hq, hkv, d, prefill - ring, seed);
    std::printf("synthetic data: %.1f s\n", seconds_since(t_gen));

    std::vector<Row> rows;
    // 1. Oracle full attention at the last position, and the streaming baseline.
    const double kv_bytes = 2.0 * hkv * context * d * sizeof(float);
    volatile double sink = 0;
    const Stats base = time_reps(reps, [&] { sink = sink + stream_read(layer); });
    Stats full_cpu;
    const Stats full = time_reps(
        reps, [&] { sink = sink + mac::oracle::full_attention(layer, scale, context - 1)[0].lse; },
        &full_cpu);
    const double keys_heads = static_cast<double>(hq) * context;
    rows.push_back({"stream read K+V (baseline)", base, "s"});
    rows.push_back({"oracle full attention", full, "s"});
    rows.push_back({"oracle full attention, CPU time (all threads)", full_cpu, "cpu-s"});
    rows.push_back({"oracle keys*heads/s",
                    {keys_heads / full.median, keys_heads / full.max, keys_heads / full.min},
                    "1/s"});
    rows.push_back(
        {"oracle keys*heads per CPU-second",
         {keys_heads / full_cpu.median, keys_heads / full_cpu.max, keys_heads / full_cpu.min},
         "1/cpu-s"});
    rows.push_back(
        {"oracle K/V bandwidth",
         {kv_bytes / full.median / 1e9, kv_bytes / full.max / 1e9, kv_bytes / full.min / 1e9},
         "GB/s"});
    rows.push_back(
        {"baseline bandwidth",
         {kv_bytes / base.median / 1e9, kv_bytes / base.max / 1e9, kv_bytes / base.min / 1e9},
         "GB/s"});

    // 2. Simulator cost per decode step.
    if (!no_sim) {
      mac::MacParams prm;
      prm.ring = ring;
      double c0 = cpu_seconds();
      auto t_sp = Clock::now();
      mac::ref::DecodeStepper<float> stepper(layer, scale, prm);
      stepper.prefill(prefill);
      const double stepper_prefill = seconds_since(t_sp), stepper_prefill_cpu = cpu_seconds() - c0;
      c0 = cpu_seconds();
      t_sp = Clock::now();
      mac::oracle::MacOracle orc(layer, scale, prm, prefill);
      const double oracle_prefill = seconds_since(t_sp), oracle_prefill_cpu = cpu_seconds() - c0;
      const std::string ms = "(M=" + std::to_string(ring) + ")";
      rows.push_back(
          {"stepper prefill " + ms, {stepper_prefill, stepper_prefill, stepper_prefill}, "s"});
      rows.push_back({"stepper prefill " + ms + ", CPU time",
                      {stepper_prefill_cpu, stepper_prefill_cpu, stepper_prefill_cpu},
                      "cpu-s"});
      rows.push_back(
          {"oracle prefill " + ms, {oracle_prefill, oracle_prefill, oracle_prefill}, "s"});
      rows.push_back({"oracle prefill " + ms + ", CPU time",
                      {oracle_prefill_cpu, oracle_prefill_cpu, oracle_prefill_cpu},
                      "cpu-s"});
      int64_t m = prefill;
      std::vector<double> ts, to, tsc, toc;
      int64_t hits = 0, total = 0;
      for (int rep = 0; rep <= reps; ++rep) {  // rep 0 is the warm-up
        double a = 0, b = 0, ac = 0, bc = 0;
        for (int64_t s = 0; s < steps; ++s, ++m) {
          double c1 = cpu_seconds();
          auto t0 = Clock::now();
          const auto sr = stepper.step(m);
          a += seconds_since(t0);
          ac += cpu_seconds() - c1;
          std::vector<mac::oracle::Decision> dec(static_cast<size_t>(hq));
          for (int64_t h = 0; h < hq; ++h) {
            dec[h] = {sr.heads[h].hit, sr.heads[h].match_pos, true};
            hits += sr.heads[h].hit;
            ++total;
          }
          c1 = cpu_seconds();
          t0 = Clock::now();
          const auto orr = orc.step(m, dec);
          b += seconds_since(t0);
          bc += cpu_seconds() - c1;
          sink = sink + orr.heads[0].out.lse;
        }
        if (rep > 0) {
          ts.push_back(a / steps);
          to.push_back(b / steps);
          tsc.push_back(ac / steps);
          toc.push_back(bc / steps);
        }
      }
      const Stats ss = stats_of(ts), so = stats_of(to), ssc = stats_of(tsc), soc = stats_of(toc);
      rows.push_back({"stepper FP32 step", ss, "s"});
      rows.push_back({"stepper FP32 step, CPU time", ssc, "cpu-s"});
      rows.push_back({"oracle FP64 step (MAC + exact)", so, "s"});
      rows.push_back({"oracle FP64 step, CPU time", soc, "cpu-s"});
      const double per_step = ss.median + so.median;
      // Prefill cost is linear in M (M positions, each a prefix attention).
      const double prefill_512 =
          (stepper_prefill + oracle_prefill) * 512.0 / static_cast<double>(ring);
      const double total_s = target_steps * per_step + prefill_512;
      // The same from CPU time, spread over the threads: what dedicated cores would take
      // (other load on the machine inflates wall time, not CPU time).
      const double total_cpu =
          (target_steps * (ssc.median + soc.median) +
           (stepper_prefill_cpu + oracle_prefill_cpu) * 512.0 / static_cast<double>(ring)) /
          nthreads;
      std::printf(
          "hit rate in the timed steps: %lld / %lld (random queries: the all-miss worst case)\n",
          static_cast<long long>(hits), static_cast<long long>(total));
      rows.push_back(
          {"simulated step (stepper + oracle)", {per_step, ss.min + so.min, ss.max + so.max}, "s"});
      rows.push_back({"extrapolated " + std::to_string(target_steps) + " steps + M=512 prefill",
                      {total_s, total_s, total_s},
                      "s"});
      rows.push_back({"  same from CPU time / threads (dedicated cores)",
                      {total_cpu, total_cpu, total_cpu},
                      "s"});
    }

    std::printf("\n%-44s %14s %14s %14s  %s\n", "measure", "median", "min", "max", "unit");
    for (const auto& r : rows)
      std::printf("%-44s %14.6g %14.6g %14.6g  %s\n", r.name.c_str(), r.s.median, r.s.min, r.s.max,
                  r.unit.c_str());
    std::printf(
        "oracle K/V bandwidth = %.0f%% of the streaming baseline; bytes per full attention: %.3g "
        "(K+V float32)\n",
        100.0 * base.median / full.median, kv_bytes);
    if (!csv.empty()) {
      std::ostringstream f;
      f << "measure,median,min,max,unit,heads,kv_heads,dim,context,threads\n";
      for (const auto& r : rows)
        f << '"' << r.name << "\"," << r.s.median << ',' << r.s.min << ',' << r.s.max << ','
          << r.unit << ',' << hq << ',' << hkv << ',' << d << ',' << context << ',' << nthreads
          << '\n';
      mac::io::write_text_file(csv, f.str());
    }
    return mac::cli::kOk;
  });
}
