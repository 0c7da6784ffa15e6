// mac-sim: runs a trace layer through the MAC decode stepper and the FP64 oracle
// (DESIGN §6 "Simulator command"). With no --trace it generates the embedded default
// synthetic trace and reports on all of its layers.
#include "mac/io/atomic_file.hpp"
#include "mac/io/run_dump.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/synth.hpp"
#include "mac/tools/json.hpp"
#include "mac/tools/simulate.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

using mac::tools::HeadRecord;
using mac::tools::SimConfig;
using mac::tools::SimSummary;
using mac::tools::StepRecord;

std::string range_str(int64_t a, int64_t b) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

std::string lse_str(const mac::ref::AttnState<double>& s) {
  if (s.is_empty()) return "empty (L = -inf)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "L = %.6f", s.lse);
  return buf;
}

/*! The teaching view: every stage of one decode step for one head. */
void explain_step(const mac::ref::LayerData& layer, double scale, const SimConfig& cfg,
                  const StepRecord& rec, int64_t h) {
  const auto& r = rec.heads[static_cast<size_t>(h)];
  const int64_t m = rec.position, M = cfg.params.ring, rr = cfg.params.tail, F = cfg.params.sinks;
  const int64_t G = layer.group_size(), hk = h / G;
  const int64_t Em = mac::prefix_end(m, rr);
  const float thr = mac::match_threshold(layer.head_dim, cfg.params.tau);
  const float* q = layer.q_post_at(m, h);
  std::printf("\n== step m = %lld (kv_len %lld), query head %lld (KV head %lld) ==\n", (long long)m,
              (long long)(m + 1), (long long)h, (long long)hk);
  std::printf(
      "  E(m) = max(0, m+1-r) = %lld, Fe(E(m)) = min(F, E(m)) = %lld   [r = %lld, F = %lld, M = "
      "%lld]\n",
      (long long)Em, (long long)mac::sink_end(F, Em), (long long)rr, (long long)F, (long long)M);
  const int64_t first = m - M > 0 ? m - M : 0;
  std::printf("1 eligible: %s (m %s gen_min = %lld; candidates p in %s)\n",
              r.eligible ? "yes" : "no", m >= cfg.params.gen_min ? ">=" : "<",
              (long long)cfg.params.gen_min, range_str(first, m).c_str());
  if (r.eligible) {
    std::printf("2 match: nearest p = %lld (lag %lld): d2 = %.6g (canonical FP32), %.10g (FP64)\n",
                (long long)r.best_pos, (long long)(m - r.best_pos), r.d2, r.d2_fp64);
    std::printf("         threshold 2*D*(1-tau)^2 = %.6g; margin %+.6g -> %s\n",
                static_cast<double>(thr), r.margin,
                r.d2 < thr ? "below threshold" : "not below threshold: MISS");
    if (r.d2 < thr)
      std::printf("         entry(%lld) covers %s: %s -> %s\n", (long long)r.best_pos,
                  range_str(mac::sink_end(F, mac::prefix_end(r.best_pos, rr)),
                            mac::prefix_end(r.best_pos, rr))
                      .c_str(),
                  r.hit ? "usable" : "unusable (empty, or E(p) < F)",
                  r.hit ? "HIT" : "MISS (no second-best search)");
  } else {
    std::printf("2 match: skipped (ineligible) -> MISS\n");
  }
  const auto band = mac::ref::attend<double>(layer, hk, q, scale, r.band_begin, r.band_end);
  const auto sink = mac::ref::attend<double>(layer, hk, q, scale, 0, r.sink_end);
  const auto tail = mac::ref::attend<double>(layer, hk, q, scale, r.tail_begin, m + 1);
  if (r.hit)
    std::printf("3 amend: prefix = entry(%lld): %s; band = attn(q_m, %s) [%lld keys]: %s\n",
                (long long)r.match_pos, lse_str(r.prefix).c_str(),
                range_str(r.band_begin, r.band_end).c_str(), (long long)(r.band_end - r.band_begin),
                lse_str(band).c_str());
  else
    std::printf("3 amend: prefix = empty; band = attn(q_m, %s) [%lld keys]: %s\n",
                range_str(r.band_begin, r.band_end).c_str(), (long long)(r.band_end - r.band_begin),
                lse_str(band).c_str());
  const auto cached = mac::ref::merge(r.prefix, band);
  std::printf(
      "4 cache write: entry(%lld) = prefix (+) band over %s: %s -> slot %lld mod %lld = %lld, "
      "chain depth %lld\n",
      (long long)m, range_str(mac::sink_end(F, Em), Em).c_str(), lse_str(cached).c_str(),
      (long long)m, (long long)M, (long long)(m % M), (long long)r.depth);
  std::printf("5 complete: sinks attn(q_m, %s): %s; tail attn(q_m, %s) [%lld keys]: %s\n",
              range_str(0, r.sink_end).c_str(), lse_str(sink).c_str(),
              range_str(r.tail_begin, m + 1).c_str(), (long long)(m + 1 - r.tail_begin),
              lse_str(tail).c_str());
  std::printf("  out = (entry (+) sinks) (+) tail: %s\n", lse_str(r.out).c_str());
  std::printf("  keys read: %lld of %lld (%.1f%%)\n", (long long)r.keys_read, (long long)(m + 1),
              100.0 * static_cast<double>(r.keys_read) / static_cast<double>(m + 1));
  if (!r.exact.is_empty())
    std::printf(
        "  vs exact full attention (FP64 oracle): %s; rel L2 %.3e, max |do| %.3e, |dL| %.3e\n",
        lse_str(r.exact).c_str(), r.rel_l2, r.max_abs, r.lse_err);
}

void print_summary(int64_t layer_index, const SimSummary& s, bool oracle) {
  std::printf("\nlayer %lld: %lld steps x %lld heads in %.1fs\n", (long long)layer_index,
              (long long)s.steps, (long long)s.heads, s.seconds);
  std::printf("  hit rate %.1f%%   KV tokens read %.1f%% of full attention (%.2fx fewer)\n",
              100.0 * s.hit_rate(), 100.0 * s.kv_fraction(),
              s.kv_fraction() > 0 ? 1.0 / s.kv_fraction() : 0.0);
  if (oracle) {
    std::printf(
        "  error vs full attention: rel L2 median %.2e  p99 %.2e  max %.2e;  max |do| %.2e;  max "
        "|dL| %.2e\n",
        mac::tools::quantile(s.rel_l2, 0.5), mac::tools::quantile(s.rel_l2, 0.99),
        mac::tools::quantile(s.rel_l2, 1.0), s.max_abs, s.max_lse_err);
    std::printf("  stepper vs FP64 oracle of the same decisions: max rel L2 %.2e\n",
                s.max_ref_rel_l2);
  }
  std::printf("  %5s %7s %7s %12s\n", "head", "hit%", "kv%", "max relL2");
  for (int64_t h = 0; h < s.heads; ++h) {
    const double full = static_cast<double>(s.keys_full) / static_cast<double>(s.heads);
    std::printf("  %5lld %6.1f%% %6.1f%% %12.2e\n", (long long)h,
                100.0 * static_cast<double>(s.head_hits[static_cast<size_t>(h)]) /
                    static_cast<double>(s.steps),
                100.0 * static_cast<double>(s.head_keys_read[static_cast<size_t>(h)]) / full,
                s.head_max_rel_l2[static_cast<size_t>(h)]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mac-sim: run a trace layer through the MAC-Attention decode stepper and the FP64 oracle.\n"
      "With no --trace, generates the embedded default synthetic trace and reports on every "
      "layer."};
  std::string trace_path, dump_path, json_path, variant = "split", precision = "fp32",
                                                storage = "production", prefill_mode = "direct";
  int64_t layer = -1, prefill = -1, steps = 0, explain_head = 0;
  bool explain = false, quiet = false;
  std::vector<int64_t> explain_steps;
  mac::MacParams p;
  mac::ref::SynthParams synth;
  app.add_option("--trace", trace_path,
                 "trace file (HDF5, schema mac-trace v1); default: embedded synthetic trace")
      ->check(CLI::ExistingFile);
  app.add_option("--layer", layer,
                 "layer index (default: 0 for a trace file, all layers for the embedded trace)");
  app.add_option("--prefill", prefill,
                 "P: positions < P are prompt, the rest are decode steps (default: tokens/2)");
  app.add_option(
         "--steps", steps,
         "decode steps to run (default: to the end of a trace file; 1024 on the embedded trace)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tau", p.tau, "match margin tau; hit iff d2 < 2*D*(1-tau)^2")
      ->capture_default_str();
  app.add_option("--ring", p.ring, "M, ring capacity")->capture_default_str();
  app.add_option("--tail", p.tail, "r, exact tail / rectification width")->capture_default_str();
  app.add_option("--sinks", p.sinks, "F, front sink tokens")->capture_default_str();
  app.add_option("--gen-min", p.gen_min, "minimum position for reuse")->capture_default_str();
  app.add_option("--variant", variant, "split | downdate")->capture_default_str();
  app.add_option("--precision", precision, "stepper arithmetic: fp32 | fp64")
      ->capture_default_str();
  app.add_option("--storage", storage, "ring states: production (BF16 o, FP32 L) | full")
      ->capture_default_str();
  app.add_option("--prefill-mode", prefill_mode, "prefill entries: direct | downdate")
      ->capture_default_str();
  app.add_option("--dump", dump_path, "write the run dump (HDF5, schema mac-run v1) of the layer");
  app.add_option("--json", json_path, "write a JSON summary");
  app.add_flag("--explain", explain,
               "print every stage of a few decode steps of one head (the teaching view)");
  app.add_option("--explain-head", explain_head, "query head to explain")->capture_default_str();
  app.add_option("--explain-steps", explain_steps,
                 "positions to explain (default: the first miss and the first hit of the head)")
      ->delimiter(',');
  app.add_option("--seed", synth.seed, "seed of the embedded synthetic trace")
      ->capture_default_str();
  app.add_option("--synth-tokens", synth.tokens, "tokens of the embedded synthetic trace")
      ->capture_default_str();
  app.add_flag("--quiet", quiet, "no progress lines");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto cfg_variant = mac::parse_variant(variant);
    const auto cfg_precision = mac::parse_precision(precision);
    const auto cfg_storage = mac::parse_state_storage(storage);
    const auto cfg_prefill_mode = mac::parse_prefill_mode(prefill_mode);
    p.validate();

    mac::ref::Trace trace;
    std::vector<int64_t> layers;
    if (trace_path.empty()) {
      // Embedded default: 4096 tokens, prompt 2048 (= gen_min), 1024 decode steps, all
      // layers: finishes well under a minute on 2 cores.
      if (!app.count("--steps"))
        steps = std::min<int64_t>(1024, synth.tokens - (prefill >= 0 ? prefill : synth.tokens / 2));
      synth.validate();
      trace = mac::ref::generate_synthetic_trace(synth);
      if (layer >= 0) {
        mac::require(layer < trace.meta.num_layers, "--layer ", layer, " is outside [0, ",
                     trace.meta.num_layers, ")");
        layers = {layer};
      } else {
        for (int64_t l = 0; l < trace.meta.num_layers; ++l) layers.push_back(l);
      }
    } else {
      const auto meta = mac::io::read_trace_meta(trace_path);
      if (layer < 0) layer = 0;
      mac::require(layer < meta.num_layers, "--layer ", layer, " is outside [0, ", meta.num_layers,
                   ") of ", trace_path);
      trace = mac::io::read_trace(trace_path, {layer});
      layers = {layer};
    }
    mac::require(dump_path.empty() || layers.size() == 1, "--dump writes one layer: give --layer");
    const auto& meta = trace.meta;
    std::printf("MAC-Attention simulation\n  trace: %s\n",
                trace_path.empty() ? "(embedded synthetic)" : trace_path.c_str());
    std::printf(
        "  source: %s\n  shape: D = %lld, Hq = %lld, Hkv = %lld (G = %lld), %lld tokens, scale "
        "%.6g\n",
        meta.source.c_str(), (long long)meta.head_dim, (long long)meta.num_q_heads,
        (long long)meta.num_kv_heads, (long long)meta.group_size(),
        (long long)trace.layers[0].tokens, meta.softmax_scale);
    mac::require(explain_head >= 0 && explain_head < meta.num_q_heads, "--explain-head ",
                 explain_head, " is outside [0, ", meta.num_q_heads, ")");

    mac::tools::JsonWriter js;
    js.begin_object();
    js.value("trace", trace_path.empty() ? std::string("(embedded synthetic)") : trace_path);
    js.value("source", meta.source);
    js.begin_object("config");
    js.value("tau", p.tau).value("ring", p.ring).value("tail", p.tail).value("sinks", p.sinks);
    js.value("gen_min", p.gen_min).value("variant", variant).value("precision", precision);
    js.value("storage", storage).value("prefill_mode", prefill_mode);
    js.end_object();
    js.begin_array("layers");

    for (size_t li = 0; li < layers.size(); ++li) {
      const auto& L = trace.layers[trace_path.empty() ? static_cast<size_t>(layers[li]) : 0];
      SimConfig cfg;
      cfg.params = p;
      cfg.variant = cfg_variant;
      cfg.precision = cfg_precision;
      cfg.storage = cfg_storage;
      cfg.prefill_mode = cfg_prefill_mode;
      cfg.prefill = prefill >= 0 ? prefill : L.tokens / 2;
      cfg.steps = steps;
      cfg.progress = !quiet;
      cfg.label = "layer " + std::to_string(layers[li]);
      cfg.validate(L);
      if (li == 0)
        std::printf(
            "  config: tau %.4g, M %lld, r %lld, F %lld, gen_min %lld, %s, %s, storage %s; prefill "
            "P = %lld, "
            "%lld decode steps\n",
            p.tau, (long long)p.ring, (long long)p.tail, (long long)p.sinks, (long long)p.gen_min,
            variant.c_str(), precision.c_str(), storage.c_str(), (long long)cfg.prefill,
            (long long)cfg.num_steps(L));

      mac::io::RunDump dump;
      const bool want_dump = !dump_path.empty();
      if (want_dump) {
        dump.resize(cfg.num_steps(L), L.num_q_heads, L.head_dim);
        dump.config = cfg;
        dump.layer = layers[li];
        dump.trace_source = meta.source;
      }
      std::set<int64_t> to_explain(explain_steps.begin(), explain_steps.end());
      bool shown_hit = false, shown_miss = false;
      const bool explain_this = explain && li == 0;
      int64_t s = 0;
      const auto summary =
          mac::tools::simulate_layer(L, meta.softmax_scale, cfg, [&](const StepRecord& rec) {
            const int64_t Hq = L.num_q_heads, D = L.head_dim;
            if (want_dump) {
              dump.position[static_cast<size_t>(s)] = rec.position;
              for (int64_t h = 0; h < Hq; ++h) {
                const auto& r = rec.heads[static_cast<size_t>(h)];
                const auto i = static_cast<size_t>(s * Hq + h);
                dump.hit[i] = r.hit ? 1 : 0;
                dump.match_pos[i] = r.hit ? r.match_pos : -1;
                dump.d2[i] = r.d2;
                dump.lse[i] = r.out.lse;
                dump.exact_lse[i] = r.exact.lse;
                dump.kv_tokens_read[i] = r.keys_read;
                for (int64_t d = 0; d < D; ++d) {
                  dump.out[i * static_cast<size_t>(D) + static_cast<size_t>(d)] = r.out.o[d];
                  dump.exact_out[i * static_cast<size_t>(D) + static_cast<size_t>(d)] =
                      r.exact.o[d];
                }
              }
            }
            if (explain_this) {
              const auto& r = rec.heads[static_cast<size_t>(explain_head)];
              bool show = to_explain.count(rec.position) > 0;
              if (explain_steps.empty() && r.eligible) {
                if (r.hit && !shown_hit) show = shown_hit = true;
                if (!r.hit && !shown_miss) show = shown_miss = true;
              }
              if (show) explain_step(L, meta.softmax_scale, cfg, rec, explain_head);
            }
            ++s;
          });
      if (explain_this && explain_steps.empty() && !(shown_hit && shown_miss))
        std::printf("\n(explain: head %lld had no eligible %s in this run)\n",
                    (long long)explain_head, shown_hit ? "miss" : "hit");
      print_summary(layers[li], summary, cfg.oracle);
      if (want_dump) {
        mac::io::write_run_dump(dump_path, dump);
        std::printf("  wrote run dump %s\n", dump_path.c_str());
      }
      js.begin_object();
      js.value("layer", layers[li]).value("prefill", cfg.prefill).value("steps", summary.steps);
      js.value("heads", summary.heads).value("hit_rate", summary.hit_rate());
      js.value("kv_read_fraction", summary.kv_fraction());
      js.value("keys_read", summary.keys_read).value("keys_full", summary.keys_full);
      js.begin_object("error_vs_full");
      js.value("rel_l2_median", mac::tools::quantile(summary.rel_l2, 0.5));
      js.value("rel_l2_p90", mac::tools::quantile(summary.rel_l2, 0.9));
      js.value("rel_l2_p99", mac::tools::quantile(summary.rel_l2, 0.99));
      js.value("rel_l2_max", mac::tools::quantile(summary.rel_l2, 1.0));
      js.value("max_abs", summary.max_abs).value("max_lse_err", summary.max_lse_err);
      js.end_object();
      js.value("stepper_vs_oracle_max_rel_l2", summary.max_ref_rel_l2);
      std::vector<double> hh, hk, hm;
      for (int64_t h = 0; h < summary.heads; ++h) {
        hh.push_back(static_cast<double>(summary.head_hits[static_cast<size_t>(h)]) /
                     static_cast<double>(summary.steps));
        hk.push_back(static_cast<double>(summary.head_keys_read[static_cast<size_t>(h)]) *
                     static_cast<double>(summary.heads) / static_cast<double>(summary.keys_full));
        hm.push_back(summary.head_max_rel_l2[static_cast<size_t>(h)]);
      }
      js.array("head_hit_rate", hh).array("head_kv_read_fraction", hk).array("head_max_rel_l2", hm);
      js.value("seconds", summary.seconds);
      js.end_object();
    }
    js.end_array();
    js.end_object();
    if (!json_path.empty()) {
      mac::io::write_text_file(json_path, js.str());
      std::printf("\nwrote JSON summary %s\n", json_path.c_str());
    }
  } catch (const mac::InputError& e) {
    std::fprintf(stderr, "mac-sim: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mac-sim: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
