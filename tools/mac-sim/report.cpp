#include "report.hpp"

#include <cmath>
#include <cstdio>

namespace mac::sim {
namespace {

using tools::quantile;

double frac(int64_t a, int64_t b) {
  return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

std::string layer_name(const LayerRun& r) {
  std::string s = std::to_string(r.layer);
  if (r.model_layer >= 0) s += " (model " + std::to_string(r.model_layer) + ")";
  return s;
}

/*! \brief "0.068 (0.196)": median and p90 of a sample, or "-" when empty. */
std::string med_p90(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f (%.3f)", quantile(v, 0.5), quantile(v, 0.9));
  return buf;
}

void append(std::vector<double>& a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

/*! \brief What a row of the closing table pools: one layer, or all of them. */
struct Pool {
  int64_t hits = 0, head_steps = 0, keys_read = 0, keys_full = 0;
  std::vector<double> mac, window, noband, random;
  double miss_max = 0;
  void add(const tools::SimSummary& s) {
    hits += s.hits;
    head_steps += s.steps * s.heads;
    keys_read += s.keys_read;
    keys_full += s.keys_full;
    append(mac, s.hit_rel_l2);
    append(window, s.window_rel_l2);
    append(noband, s.noband_rel_l2);
    append(random, s.random_rel_l2);
    miss_max = std::max(miss_max, s.miss_max_rel_l2);
  }
};

void row(const std::string& name, const Pool& p) {
  std::printf("  %-15s %6.1f%% %8.1f%%   %-15s %-15s %-15s %-15s\n", name.c_str(),
              100.0 * frac(p.hits, p.head_steps), 100.0 * frac(p.keys_read, p.keys_full),
              med_p90(p.mac).c_str(), med_p90(p.window).c_str(), med_p90(p.noband).c_str(),
              med_p90(p.random).c_str());
}

void stats_json(tools::JsonWriter& js, const char* key, const std::vector<double>& v) {
  js.begin_object(key);
  js.value("count", static_cast<int64_t>(v.size()));
  js.value("rel_l2_median", quantile(v, 0.5)).value("rel_l2_p90", quantile(v, 0.9));
  js.value("rel_l2_max", quantile(v, 1.0));
  js.end_object();
}

}  // namespace

void print_layer(const LayerRun& run, bool per_head) {
  const auto& s = run.summary;
  std::printf("\nlayer %s: %lld steps x %lld heads in %.1fs\n", layer_name(run).c_str(),
              (long long)s.steps, (long long)s.heads, s.seconds);
  std::printf("  hit rate %.1f%%   KV tokens read %.1f%% of full attention (%.2fx fewer)\n",
              100.0 * s.hit_rate(), 100.0 * s.kv_fraction(),
              s.kv_fraction() > 0 ? 1.0 / s.kv_fraction() : 0.0);
  if (run.gate)
    std::printf(
        "  gate: %.1f%% of steps gated (%lld by a window, %lld by the floor), %lld matched;  "
        "predicted bytes %.3f of full attention's\n",
        100.0 * s.gated_fraction(), (long long)s.gate_off, (long long)s.gate_floor,
        (long long)s.gate_on, s.bytes_fraction());
  if (!s.rel_l2.empty()) {
    std::printf(
        "  error vs full attention: rel L2 median %.2e  p99 %.2e  max %.2e;  max |do| %.2e;  max "
        "|dL| %.2e\n",
        quantile(s.rel_l2, 0.5), quantile(s.rel_l2, 0.99), quantile(s.rel_l2, 1.0), s.max_abs,
        s.max_lse_err);
    if (!s.hit_rel_l2.empty())
      std::printf("  of which hits: rel L2 median %.2e  p90 %.2e  max %.2e;  misses: max %.2e\n",
                  quantile(s.hit_rel_l2, 0.5), quantile(s.hit_rel_l2, 0.9),
                  quantile(s.hit_rel_l2, 1.0), s.miss_max_rel_l2);
    std::printf("  stepper vs FP64 oracle of the same decisions: max rel L2 %.2e\n",
                s.max_ref_rel_l2);
  }
  if (s.attention_count > 0)
    std::printf(
        "  exact attention: entropy %.2f nats (as spread as %.0f equally weighted keys); the last "
        "r = %lld keys hold %.1f%% of the mass\n",
        s.mean_entropy(), std::exp(s.mean_entropy()), (long long)run.tail,
        100.0 * s.mean_tail_mass());
  if (per_head) {
    std::printf("  %5s %7s %7s %12s\n", "head", "hit%", "kv%", "max relL2");
    for (int64_t h = 0; h < s.heads; ++h) {
      const double full = static_cast<double>(s.keys_full) / static_cast<double>(s.heads);
      std::printf("  %5lld %6.1f%% %6.1f%% %12.2e\n", (long long)h,
                  100.0 * frac(s.head_hits[static_cast<size_t>(h)], s.steps),
                  100.0 * static_cast<double>(s.head_keys_read[static_cast<size_t>(h)]) / full,
                  s.head_max_rel_l2[static_cast<size_t>(h)]);
    }
  }
}

void print_closing(const std::vector<LayerRun>& runs) {
  Pool all;
  for (const auto& r : runs) all.add(r.summary);
  if (all.mac.empty() && all.hits > 0) {
    std::printf("\nNo error figures: the run had no oracle (--no-oracle).\n");
    return;
  }
  if (all.mac.empty()) {
    std::printf(
        "\nNo head-step reused a cached entry, so there is no reuse error to show: every output "
        "above is exact attention.\n");
    return;
  }
  if (all.window.empty()) {
    std::printf(
        "\nReused outputs against exact attention: relative L2 error over the %.1f%% of "
        "head-steps that hit, median %.3f (p90 %.3f); misses are exact (max %.1e). "
        "--reference-points sets these beside what reuse done other ways would give.\n",
        100.0 * frac(all.hits, all.head_steps), quantile(all.mac, 0.5), quantile(all.mac, 0.9),
        all.miss_max);
    return;
  }
  std::printf(
      "\nReused outputs against exact attention: relative L2 error over the hits, median "
      "(p90)\n");
  std::printf("  %-15s %7s %9s   %-15s %-15s %-15s %-15s\n", "layer", "hits", "keys read", "MAC",
              "same keys,", "entry without", "random entry");
  std::printf("  %-15s %7s %9s   %-15s %-15s %-15s %-15s\n", "", "", "", "", "no reuse", "its band",
              "for the nearest");
  for (const auto& r : runs) {
    Pool p;
    p.add(r.summary);
    row(layer_name(r), p);
  }
  if (runs.size() > 1) row("all layers", all);

  const double mac = quantile(all.mac, 0.5), win = quantile(all.window, 0.5),
               nob = quantile(all.noband, 0.5), rnd = quantile(all.random, 0.5);
  const bool beats = mac < win && mac < nob && (all.random.empty() || mac < rnd);
  std::printf("\n%s MAC read %.1f%% of the keys full attention reads (%.1fx fewer).\n",
              beats ? "The method works on this trace:"
                    : "The method does NOT beat every reference point on this trace:",
              100.0 * frac(all.keys_read, all.keys_full),
              all.keys_read > 0 ? frac(all.keys_full, all.keys_read) : 0.0);
  std::printf(
      "On the %.1f%% of head-steps that reused a cached entry its output is within %.3f (median) "
      "of exact attention,\n"
      "against %.3f for attention over the same keys without the entry, %.3f for the entry "
      "without its band,\n"
      "and %.3f for a random entry in place of the nearest: the nearest earlier query's attention "
      "over the old keys\n"
      "stands in for the new query's, and the band and tail recompute the recent keys exactly. "
      "Misses are exact (max %.1e).\n",
      100.0 * frac(all.hits, all.head_steps), mac, win, nob, rnd, all.miss_max);
  std::printf(
      "How to read: each figure is |o - o_exact| / |o_exact| of one head's attention output at "
      "one step (0 = exact, 1 = as far off as an output of zeros); lower than the reference "
      "columns means the reuse carries information.\n");
}

void layer_json(tools::JsonWriter& js, const LayerRun& run) {
  const auto& s = run.summary;
  js.begin_object();
  js.value("layer", run.layer).value("model_layer", run.model_layer);
  js.value("prefill", run.prefill).value("steps", s.steps);
  js.value("heads", s.heads).value("hit_rate", s.hit_rate());
  js.value("kv_read_fraction", s.kv_fraction());
  js.value("keys_read", s.keys_read).value("keys_full", s.keys_full);
  js.begin_object("error_vs_full");
  js.value("rel_l2_median", quantile(s.rel_l2, 0.5));
  js.value("rel_l2_p90", quantile(s.rel_l2, 0.9));
  js.value("rel_l2_p99", quantile(s.rel_l2, 0.99));
  js.value("rel_l2_max", quantile(s.rel_l2, 1.0));
  js.value("max_abs", s.max_abs).value("max_lse_err", s.max_lse_err);
  js.value("miss_rel_l2_max", s.miss_max_rel_l2);
  js.end_object();
  // Over the hits: MAC and the reference points of simulate.hpp on the same hits.
  js.begin_object("hits");
  stats_json(js, "mac", s.hit_rel_l2);
  stats_json(js, "window", s.window_rel_l2);
  stats_json(js, "no_band", s.noband_rel_l2);
  stats_json(js, "random_entry", s.random_rel_l2);
  stats_json(js, "mac_where_random_entry", s.hit_random_mac);
  js.end_object();
  js.value("stepper_vs_oracle_max_rel_l2", s.max_ref_rel_l2);
  js.begin_object("attention");
  js.value("entropy_mean", s.mean_entropy()).value("tail_mass_mean", s.mean_tail_mass());
  js.end_object();
  std::vector<double> hh, hk, hm;
  for (int64_t h = 0; h < s.heads; ++h) {
    hh.push_back(frac(s.head_hits[static_cast<size_t>(h)], s.steps));
    hk.push_back(static_cast<double>(s.head_keys_read[static_cast<size_t>(h)]) *
                 static_cast<double>(s.heads) / static_cast<double>(s.keys_full));
    hm.push_back(s.head_max_rel_l2[static_cast<size_t>(h)]);
  }
  js.array("head_hit_rate", hh).array("head_kv_read_fraction", hk).array("head_max_rel_l2", hm);
  // The gate and the byte model (semantics §3.5), with the gate on or off.
  js.begin_object("gate");
  js.value("enabled", run.gate).value("steps_on", s.gate_on);
  js.value("steps_off", s.gate_off).value("steps_floor", s.gate_floor);
  js.value("gated_fraction", s.gated_fraction());
  js.value("bytes", s.bytes).value("bytes_full", s.bytes_full);
  js.value("bytes_fraction", s.bytes_fraction());
  js.array("step_mode", s.step_mode).array("step_hits", s.step_hits);
  js.array("step_bytes", s.step_bytes);
  js.end_object();
  js.array("warnings", run.warnings);
  js.value("seconds", s.seconds);
  js.end_object();
}

}  // namespace mac::sim
