// mac-sim: runs trace layers through the MAC decode stepper and the FP64 oracle (the
// simulator command of docs/file-formats.md). With no --trace it runs the committed
// SmolLM2-135M fixture with a configuration chosen for its length; --synthetic runs the
// embedded synthetic trace instead.
#include "explain.hpp"
#include "report.hpp"

#include "mac/cli/cli.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"
#include "mac/io/run_dump.hpp"
#include "mac/io/schema.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/synth.hpp"
#include "mac/tools/json.hpp"
#include "mac/tools/simulate.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#ifndef MAC_DEFAULT_TRACE
#error "MAC_DEFAULT_TRACE (the committed fixture's path) is set by tools/mac-sim/CMakeLists.txt"
#endif

namespace {

using mac::tools::SimConfig;
using mac::tools::StepRecord;

/*! A degenerate configuration, refused under --strict. */
struct Degenerate : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/*! Prints a warning line, or throws under --strict. */
void warn(const std::string& w, bool strict) {
  if (strict) throw Degenerate(w + " (--strict)");
  std::fprintf(stderr, "mac-sim: warning: %s\n", w.c_str());
}

/*! The model layer a fixture layer was recorded from (the recorder's `model_layer`
 *  attribute, docs/real-traces.md), −1 if the file does not say. */
int64_t model_layer(const std::string& path, int64_t layer) {
  if (path.empty()) return -1;
  namespace key = mac::io::schema::trace;
  const auto f = mac::h5::open_file(path);
  const std::string g = std::string(key::kLayers) + "/" + std::to_string(layer);
  if (!mac::h5::exists(f.get(), g)) return -1;
  const auto grp = mac::h5::open_group(f.get(), g);
  return mac::h5::has_attr(grp.get(), key::kModelLayer)
             ? mac::h5::attr_int64(grp.get(), key::kModelLayer)
             : -1;
}

/*! The built-in jobs' configuration for a trace of T tokens: half prompt, a ring that holds
 *  every prompt position up to the spec's 512, a tail of T/16 within [16, 256] and reuse
 *  from the first decode step. At T = 4096 these are the spec's defaults (M 512, r 256,
 *  gen_min 2048). */
struct Suited {
  int64_t prefill, ring, tail, gen_min;
};
Suited suited(int64_t T, int64_t prefill) {
  Suited s{};
  s.prefill = prefill >= 0 ? prefill : T / 2;
  s.ring = std::min<int64_t>(512, std::max<int64_t>(1, s.prefill));
  s.tail = std::clamp<int64_t>(T / 16, 16, 256);
  s.gen_min = s.prefill;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mac-sim: run trace layers through the MAC-Attention decode stepper and the FP64 oracle.\n"
      "With no --trace: the committed SmolLM2-135M fixture (data/real/smollm2_4layers_512.h5), "
      "every layer,\nwith a configuration chosen for its length and printed "
      "(MAC_SIM_DEFAULT_TRACE: "
      "another place to find it). --synthetic: the "
      "embedded synthetic trace.\nExit status (docs/cli.md): 0 done, 2 bad input, 3 a "
      "degenerate run refused by --strict, 4 a failed write, 5 an internal error."};
  using mac::kMaxTokens;
  using mac::cli::range;
  std::string trace_path, dump_path, json_path, variant = "split", precision = "fp32",
                                                storage = "production", prefill_mode = "direct";
  int64_t layer = -1, prefill = -1, steps = 0, explain_head = 0;
  bool explain = false, quiet = false, synthetic = false, strict = false, per_head = false;
  std::vector<int64_t> explain_steps;
  mac::MacParams p;
  mac::ref::SynthParams synth = mac::ref::SynthParams::calibrated();
  std::string synth_model = "v2";
  app.add_option("--trace", trace_path,
                 "trace file (HDF5, schema mac-trace v1); default: the committed fixture")
      ->check(CLI::ExistingFile);
  app.add_flag("--synthetic", synthetic, "run the embedded synthetic trace instead")
      ->excludes("--trace");
  app.add_option("--layer", layer, "layer index (default: 0 for --trace, all layers otherwise)")
      ->check(range<int64_t>(0, mac::kMaxLayers - 1));
  // Unset (−1 inside) means tokens / 2; a value given must be a real prompt length.
  app.add_option("--prefill", prefill,
                 "P: positions < P are prompt, the rest are decode steps (default: tokens/2)")
      ->check(range<int64_t>(1, kMaxTokens));
  app.add_option("--steps", steps,
                 "decode steps to run (default: to the end; 1024 on the synthetic trace)")
      ->check(range<int64_t>(0, kMaxTokens));
  app.add_option("--tau", p.tau, "match margin tau; hit iff d2 < 2*D*(1-tau)^2")
      ->check(mac::cli::range_below(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--ring", p.ring, "M, ring capacity (built-in jobs: chosen, see above)")
      ->check(range<int64_t>(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--tail", p.tail, "r, exact tail / rectification width (built-in jobs: chosen)")
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--sinks", p.sinks, "F, front sink tokens")
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--gen-min", p.gen_min, "minimum position for reuse (built-in jobs: P)")
      ->check(range<int64_t>(0, kMaxTokens))
      ->capture_default_str();
  app.add_option("--gate-window", p.gate_window,
                 "W: MAC steps per window of the adaptive gate (docs/semantics.md 3.5); 0: off")
      ->check(range<int64_t>(0, mac::kGateMaxWindow))
      ->capture_default_str();
  app.add_option("--gate-probe", p.gate_probe, "P: gated steps before the gate probes again")
      ->check(range<int64_t>(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--gate-margin", p.gate_margin,
                 "gate off iff bytes with MAC >= margin/1000 of full attention's")
      ->check(range<int64_t>(1, mac::kGateMaxMargin))
      ->capture_default_str();
  app.add_option("--gate-min-hit", p.gate_min_hit,
                 "gate off iff a window's hits < this per mille of its head-steps")
      ->check(range<int64_t>(0, mac::kGatePerMille))
      ->capture_default_str();
  app.add_option("--gate-fixed-bytes", p.gate_fixed_bytes,
                 "fixed cost of a step that matches, in bytes (a batch of B shares it: B_fix/B)")
      ->check(range<int64_t>(0, mac::kGateMaxFixedBytes))
      ->capture_default_str();
  app.add_option("--variant", variant, "split | downdate")
      ->check(CLI::IsMember({"split", "downdate"}))
      ->capture_default_str();
  app.add_option("--precision", precision, "stepper arithmetic: fp32 | fp64")
      ->check(CLI::IsMember({"fp32", "fp64"}))
      ->capture_default_str();
  app.add_option("--storage", storage, "ring states: production (BF16 o, FP32 L) | full")
      ->check(CLI::IsMember({"production", "full"}))
      ->capture_default_str();
  app.add_option("--prefill-mode", prefill_mode, "prefill entries: direct | downdate")
      ->check(CLI::IsMember({"direct", "downdate"}))
      ->capture_default_str();
  app.add_option("--dump", dump_path, "write the run dump (HDF5, schema mac-run v1) of the layer");
  app.add_option("--json", json_path,
                 "write a JSON summary (with --explain: the explained steps and the head's "
                 "decisions at every step)");
  app.add_flag("--explain", explain,
               "print every stage of a few decode steps of one head (the teaching view)");
  app.add_option("--explain-head", explain_head, "query head to explain")
      ->check(range<int64_t>(0, mac::kMaxHeads - 1))
      ->capture_default_str();
  app.add_option("--explain-steps", explain_steps,
                 "positions to explain, decode steps of the run (default: the first miss and the "
                 "first hit of the head)")
      ->delimiter(',')
      ->check(range<int64_t>(0, kMaxTokens));
  app.add_flag("--per-head", per_head, "print each head's hit rate, keys read and worst error");
  bool reference_points = false;
  app.add_flag("--reference-points,!--no-reference-points", reference_points,
               "also evaluate every hit against the reference points (same keys without reuse, "
               "the entry without its band, a random entry) and measure exact attention's "
               "entropy and tail mass (default: on for the built-in jobs, off with --trace)");
  app.add_flag("--strict", strict,
               "refuse a degenerate run (exit status 3) instead of warning about it");
  app.add_option("--seed", synth.seed, "seed of the synthetic trace")->capture_default_str();
  app.add_option("--synth-tokens", synth.tokens, "tokens of the synthetic trace")
      ->check(range<int64_t>(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--synth-model", synth_model,
                 "synthetic model: v2 (calibrated against the SmolLM2 fixture) | v1 "
                 "(docs/synthetic-traces.md)")
      ->capture_default_str();
  app.add_flag("--quiet", quiet, "no progress lines");
  bool no_oracle = false;
  app.add_flag("--no-oracle", no_oracle,
               "skip the FP64 oracle: decisions, keys and the gate's bytes only (no error "
               "figures, no reference points)")
      ->excludes("--dump")
      ->excludes("--explain");
  if (auto rc = mac::cli::parse(app, argc, argv, "mac-sim")) return *rc;

  try {
    const auto cfg_variant = mac::parse_variant(variant);
    const auto cfg_precision = mac::parse_precision(precision);
    const auto cfg_storage = mac::parse_state_storage(storage);
    const auto cfg_prefill_mode = mac::parse_prefill_mode(prefill_mode);

    // Which trace: a file given, the embedded synthetic one, or the committed fixture.
    const bool fixture = trace_path.empty() && !synthetic;
    if (fixture) {
      // Compiled in: the source tree the build was configured from; the environment may
      // point elsewhere (an installed binary, a moved checkout).
      const char* env = std::getenv("MAC_SIM_DEFAULT_TRACE");
      const bool from_env = env != nullptr && *env != '\0';
      trace_path = from_env ? env : MAC_DEFAULT_TRACE;
      mac::require(
          std::filesystem::is_regular_file(trace_path),
          "the default trace, the committed SmolLM2-135M fixture, is not at ", trace_path,
          from_env ? " (MAC_SIM_DEFAULT_TRACE)" : " (the source tree this mac-sim was built from)",
          ": give --trace FILE, set MAC_SIM_DEFAULT_TRACE, or use --synthetic for the "
          "embedded synthetic trace");
    }
    // The outputs are checked before anything is read or computed (docs/cli.md): each can
    // be created, is no input and not the other output.
    mac::require(explain || explain_steps.empty(), "--explain-steps needs --explain");
    const std::string input = synthetic ? std::string() : trace_path;
    if (!dump_path.empty()) {
      mac::io::check_output(dump_path, "--dump");
      mac::io::refuse_if_same_file(dump_path, {input});
    }
    if (!json_path.empty()) {
      mac::io::check_output(json_path, "--json");
      mac::io::refuse_if_same_file(json_path, {input, dump_path});
    }
    mac::ref::Trace trace;
    std::vector<int64_t> layers;
    if (synthetic) {
      mac::require(synth_model == "v1" || synth_model == "v2", "--synth-model '", synth_model,
                   "' is not v1 or v2");
      if (synth_model == "v1") synth.rope_tilt = mac::ref::SynthParams{}.rope_tilt;
      synth.validate();
      trace = mac::ref::generate_synthetic_trace(synth);
      mac::require(layer < synth.num_layers, "--layer ", layer, " is outside [0, ",
                   synth.num_layers, ") of the synthetic trace");
    } else {
      const auto meta = mac::io::read_trace_meta(trace_path);
      mac::require(layer < meta.num_layers, "--layer ", layer, " is outside [0, ", meta.num_layers,
                   ") of ", trace_path);
      std::vector<int64_t> want;
      if (layer >= 0 || !fixture) want = {std::max<int64_t>(layer, 0)};
      trace = mac::io::read_trace(trace_path, want);
    }
    const auto& meta = trace.meta;
    if (layer >= 0)
      layers = {layer};
    else if (fixture || synthetic)
      for (int64_t l = 0; l < static_cast<int64_t>(trace.layers.size()); ++l) layers.push_back(l);
    else
      layers = {0};
    mac::require(dump_path.empty() || layers.size() == 1, "--dump writes one layer: give --layer");
    mac::require(explain_head >= 0 && explain_head < meta.num_q_heads, "--explain-head ",
                 explain_head, " is outside [0, ", meta.num_q_heads, ")");
    const int64_t T = trace.layers[0].tokens;

    // The built-in jobs choose M, r, P and gen_min for the trace's length; flags override.
    const bool builtin = fixture || synthetic;
    if (builtin) {
      const auto s = suited(T, prefill);
      prefill = s.prefill;
      if (!app.count("--ring")) p.ring = s.ring;
      if (!app.count("--tail")) p.tail = s.tail;
      if (!app.count("--gen-min")) p.gen_min = s.gen_min;
      if (synthetic && !app.count("--steps")) steps = std::min<int64_t>(1024, T - prefill);
    }
    p.validate();

    std::printf("MAC-Attention simulation\n  trace: %s\n",
                synthetic ? "(embedded synthetic)"
                          : (trace_path + (fixture ? " (the committed fixture)" : "")).c_str());
    std::printf(
        "  source: %s\n  shape: D = %lld, Hq = %lld, Hkv = %lld (G = %lld), %lld tokens, scale "
        "%.6g\n",
        meta.source.c_str(), (long long)meta.head_dim, (long long)meta.num_q_heads,
        (long long)meta.num_kv_heads, (long long)meta.group_size(), (long long)T,
        meta.softmax_scale);

    mac::tools::JsonWriter js;
    js.begin_object();
    js.value("trace", synthetic ? std::string("(embedded synthetic)") : trace_path);
    js.value("source", meta.source);
    js.begin_object("config");
    js.value("tau", p.tau).value("ring", p.ring).value("tail", p.tail).value("sinks", p.sinks);
    js.value("gen_min", p.gen_min).value("variant", variant).value("precision", precision);
    js.value("storage", storage).value("prefill_mode", prefill_mode);
    js.value("gate_window", p.gate_window).value("gate_probe", p.gate_probe);
    js.value("gate_margin", p.gate_margin).value("gate_min_hit", p.gate_min_hit);
    js.value("gate_fixed_bytes", p.gate_fixed_bytes);
    js.value("baseline_seed", static_cast<int64_t>(SimConfig{}.baseline_seed));
    js.end_object();
    js.begin_array("layers");

    mac::io::RunDump dump;  // of the one layer --dump writes
    std::vector<mac::sim::LayerRun> runs;
    std::vector<mac::sim::Explained> explained;
    int64_t explained_prefill = -1;
    std::vector<int64_t> head_match_of;
    std::vector<StepRecord> head_steps;  // the explained head's record at every step
    for (size_t li = 0; li < layers.size(); ++li) {
      // All layers are in memory for the built-in jobs without --layer; one otherwise.
      const auto& L = trace.layers[trace.layers.size() > 1 ? static_cast<size_t>(layers[li]) : 0];
      SimConfig cfg;
      cfg.params = p;
      cfg.variant = cfg_variant;
      cfg.precision = cfg_precision;
      cfg.storage = cfg_storage;
      cfg.prefill_mode = cfg_prefill_mode;
      cfg.prefill = prefill >= 0 ? prefill : L.tokens / 2;
      cfg.steps = steps;
      cfg.progress = !quiet;
      cfg.oracle = !no_oracle;
      // Extra work beside the run's own: on where mac-sim demonstrates, asked for elsewhere,
      // so that a --trace run does the work of the stepper and the oracle only.
      cfg.baselines = cfg.attention_stats =
          app.count("--reference-points") + app.count("--no-reference-points") > 0
              ? reference_points
              : builtin;
      cfg.label = "layer " + std::to_string(layers[li]);
      cfg.validate(L);
      const int64_t first = cfg.prefill, last = cfg.prefill + cfg.num_steps(L) - 1;

      mac::sim::LayerRun run;
      run.layer = layers[li];
      run.model_layer = synthetic ? -1 : model_layer(trace_path, layers[li]);
      run.prefill = cfg.prefill;
      run.tail = p.tail;
      run.gate = p.gate_window > 0;
      if (li == 0) {
        std::printf(
            "  config: tau %.4g, M %lld, r %lld, F %lld, gen_min %lld, %s, %s, storage %s; "
            "prefill "
            "P = %lld, %lld decode steps (positions %lld to %lld)\n",
            p.tau, (long long)p.ring, (long long)p.tail, (long long)p.sinks, (long long)p.gen_min,
            variant.c_str(), precision.c_str(), storage.c_str(), (long long)cfg.prefill,
            (long long)cfg.num_steps(L), (long long)first, (long long)last);
        if (builtin)
          std::printf(
              "          chosen for a %lld-token trace: P = T/2, M = min(512, P) (the ring holds "
              "the prompt's last M queries), r = T/16 in [16, 256], gen_min = P (reuse from the "
              "first decode step); each flag overrides its value\n",
              (long long)T);
        if (run.gate)
          std::printf(
              "  gate: window W %lld, probe P %lld, margin %lld per mille, min hit %lld "
              "per mille, fixed %lld bytes per step\n",
              (long long)p.gate_window, (long long)p.gate_probe, (long long)p.gate_margin,
              (long long)p.gate_min_hit, (long long)p.gate_fixed_bytes);
        for (const auto& w : mac::tools::config_warnings(L, cfg)) warn(w, strict);
        for (const int64_t m : explain_steps)
          mac::require(m >= first && m <= last, "--explain-steps ", m,
                       " is not a decode step of this run: they are [", first, ", ", last,
                       "] (positions below P = ", cfg.prefill, " are the prompt)");
      }

      const bool want_dump = !dump_path.empty();
      if (want_dump) {
        dump.resize(cfg.num_steps(L), L.num_q_heads, L.head_dim);
        dump.config = cfg;
        dump.layer = layers[li];
        dump.trace_source = meta.source;
      }
      const std::set<int64_t> to_explain(explain_steps.begin(), explain_steps.end());
      bool shown_hit = false, shown_miss = false;
      const bool explain_this = explain && li == 0;
      if (explain_this) {
        // The chain of an entry walks back through what each position reused.
        head_match_of.assign(static_cast<size_t>(L.tokens), -1);
        for (int64_t q = 0; q < cfg.prefill; ++q)
          head_match_of[static_cast<size_t>(q)] = mac::sim::kPromptEntry;
      }
      int64_t s = 0;
      run.summary =
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
              head_match_of[static_cast<size_t>(rec.position)] = r.hit ? r.match_pos : -1;
              StepRecord one;
              one.position = rec.position;
              one.heads = {r};
              head_steps.push_back(std::move(one));
              bool show = to_explain.count(rec.position) > 0;
              if (explain_steps.empty() && r.eligible) {
                if (r.hit && !shown_hit) show = shown_hit = true;
                if (!r.hit && !shown_miss) show = shown_miss = true;
              }
              if (show) {
                explained.push_back(mac::sim::explain(L, meta.softmax_scale, cfg, rec, explain_head,
                                                      head_match_of));
                mac::sim::print(explained.back());
              }
            }
            ++s;
          });
      if (explain_this && explain_steps.empty() && !(shown_hit && shown_miss))
        std::printf("\n(explain: head %lld had no eligible %s in this run)\n",
                    (long long)explain_head, shown_hit ? "miss" : "hit");
      // A run warning only where the configuration did not already explain it.
      run.warnings = mac::tools::config_warnings(L, cfg);
      if (run.warnings.empty())
        for (const auto& w : mac::tools::run_warnings(run.summary, cfg)) {
          warn(w, strict);
          run.warnings.push_back(w);
        }
      mac::sim::print_layer(run, per_head);
      mac::sim::layer_json(js, run);
      if (explain_this) explained_prefill = run.prefill;
      runs.push_back(std::move(run));
    }
    js.end_array();
    mac::sim::print_closing(runs);

    if (explain && explained_prefill >= 0) {
      // The teaching view as data: docs/walkthrough.md draws its figures from it.
      js.begin_object("explain");
      js.value("layer", layers[0]).value("head", explain_head);
      js.value("prefill", explained_prefill).value("variant", variant);
      std::vector<int64_t> pos, hit, match, depth, keys;
      std::vector<double> rel;
      for (const auto& st : head_steps) {
        const auto& r = st.heads[0];
        pos.push_back(st.position);
        hit.push_back(r.hit ? 1 : 0);
        match.push_back(r.hit ? r.match_pos : -1);
        depth.push_back(r.depth);
        keys.push_back(r.keys_read);
        rel.push_back(r.rel_l2);
      }
      js.array("position", pos).array("hit", hit).array("match_pos", match);
      js.array("depth", depth).array("keys_read", keys).array("rel_l2", rel);
      js.begin_array("steps");
      for (const auto& e : explained) mac::sim::to_json(js, e);
      js.end_array();
      js.end_object();
    }
    js.end_object();
    // Both outputs are complete under temporary names before either is renamed: a failed
    // --json write leaves the old dump (and the old summary) in place.
    std::optional<mac::io::Temporary> dump_tmp, json_tmp;
    if (!dump_path.empty()) {
      dump_tmp.emplace(dump_path);
      mac::io::write_run_dump(dump_tmp->path(), dump);
    }
    if (!json_path.empty()) {
      json_tmp.emplace(json_path);
      mac::io::write_text_file(json_tmp->path(), js.str());
    }
    if (dump_tmp) {
      dump_tmp->commit();
      std::printf("  wrote run dump %s\n", dump_path.c_str());
    }
    if (json_tmp) {
      json_tmp->commit();
      std::printf("\nwrote JSON summary %s\n", json_path.c_str());
    }
  } catch (const Degenerate& e) {
    std::fprintf(stderr, "mac-sim: error: %s\n", e.what());
    return mac::cli::kIncomplete;
  } catch (...) {
    return mac::cli::failed("mac-sim");
  }
  return mac::cli::kOk;
}
