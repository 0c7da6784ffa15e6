#include "explain.hpp"

#include "mac/ref/attention.hpp"

#include <cmath>
#include <cstdio>

namespace mac::sim {
namespace {

std::string range_str(int64_t a, int64_t b) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

std::string lse_str(const ref::AttnState<double>& s) {
  if (s.is_empty()) return "empty (L = -inf)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "L = %.6f", s.lse);
  return buf;
}

void state_json(tools::JsonWriter& js, const char* key, const ref::AttnState<double>& s) {
  js.value(key, s.lse);  // natural log; −inf (empty) is written as null
}

}  // namespace

Explained explain(const ref::LayerData& layer, double scale, const tools::SimConfig& cfg,
                  const tools::StepRecord& rec, int64_t h, const std::vector<int64_t>& match_of) {
  Explained e;
  e.rec = rec.heads[static_cast<size_t>(h)];
  const auto& r = e.rec;
  e.m = rec.position;
  e.head = h;
  e.kv_head = h / layer.group_size();
  e.ring = cfg.params.ring;
  e.tail = cfg.params.tail;
  e.sinks = cfg.params.sinks;
  e.gen_min = cfg.params.gen_min;
  e.em = prefix_end(e.m, e.tail);
  e.fem = sink_end(e.sinks, e.em);
  e.first_candidate = e.m - e.ring > 0 ? e.m - e.ring : 0;
  e.threshold = static_cast<double>(match_threshold(layer.head_dim, cfg.params.tau));
  if (r.best_pos >= 0) {
    e.entry_end = prefix_end(r.best_pos, e.tail);
    e.entry_begin = sink_end(e.sinks, e.entry_end);
  }
  const float* q = layer.q_post_at(e.m, h);
  e.band = ref::attend<double>(layer, e.kv_head, q, scale, r.band_begin, r.band_end);
  e.sink = ref::attend<double>(layer, e.kv_head, q, scale, 0, r.sink_end);
  e.tail_state = ref::attend<double>(layer, e.kv_head, q, scale, r.tail_begin, e.m + 1);
  e.cached = ref::merge(r.prefix, e.band);
  e.downdate = cfg.variant == Variant::kDowndate;
  // The downdate form removes W = sinks ⊕ tail from the step's output (semantics §2.3).
  e.w = ref::merge(e.sink, e.tail_state);
  if (!e.w.is_empty() && !r.out.is_empty()) {
    e.t = std::exp(e.w.lse - r.out.lse);
    e.one_minus_t = -std::expm1(e.w.lse - r.out.lse);
  } else {
    e.t = 0;
    e.one_minus_t = 1;
  }
  const auto dd = ref::downdate(r.out, e.w);
  e.entry_downdate = dd.state;
  e.condition = dd.condition;
  // entry(m)'s chain: each member computed its band with its own query (semantics §3).
  if (r.hit) {
    int64_t c = e.m;
    while (true) {
      const int64_t nxt = match_of[static_cast<size_t>(c)];
      const int64_t ec = prefix_end(c, e.tail);
      if (nxt >= 0) {
        e.chain.push_back({c, prefix_end(nxt, e.tail), ec, true, false});
        c = nxt;
      } else {
        e.chain.push_back({c, sink_end(e.sinks, ec), ec, false, nxt == kPromptEntry});
        break;
      }
    }
  }
  return e;
}

void print(const Explained& e) {
  const auto& r = e.rec;
  const long long m = e.m;
  std::printf("\n== step m = %lld (kv_len %lld), query head %lld (KV head %lld)%s ==\n", m, m + 1,
              (long long)e.head, (long long)e.kv_head, e.downdate ? ", downdate form" : "");
  std::printf(
      "  E(m) = max(0, m+1-r) = %lld, Fe(E(m)) = min(F, E(m)) = %lld   [r = %lld, F = %lld, M = "
      "%lld]\n",
      (long long)e.em, (long long)e.fem, (long long)e.tail, (long long)e.sinks, (long long)e.ring);
  std::printf("1 eligible: %s (m %s gen_min = %lld; candidates p in %s)\n",
              r.eligible ? "yes" : "no", e.m >= e.gen_min ? ">=" : "<", (long long)e.gen_min,
              range_str(e.first_candidate, e.m).c_str());
  const bool below = r.eligible && r.d2 < e.threshold;
  if (r.eligible) {
    std::printf("2 match: nearest p = %lld (lag %lld): d2 = %.6g (canonical FP32), %.10g (FP64)\n",
                (long long)r.best_pos, (long long)(e.m - r.best_pos), r.d2, r.d2_fp64);
    std::printf("         threshold 2*D*(1-tau)^2 = %.6g; margin %+.6g -> %s\n", e.threshold,
                r.margin, below ? "below threshold" : "not below threshold: MISS");
    if (below)
      std::printf("         entry(%lld) covers %s: %s -> %s\n", (long long)r.best_pos,
                  range_str(e.entry_begin, e.entry_end).c_str(),
                  r.hit ? "usable" : "unusable (empty, or E(p) < F)",
                  r.hit ? "HIT" : "MISS (no second-best search)");
  } else {
    std::printf("2 match: skipped (ineligible) -> MISS\n");
  }
  if (r.hit)
    std::printf("3 amend: prefix = entry(%lld): %s; band = attn(q_m, %s) [%lld keys]: %s\n",
                (long long)r.match_pos, lse_str(r.prefix).c_str(),
                range_str(r.band_begin, r.band_end).c_str(), (long long)(r.band_end - r.band_begin),
                lse_str(e.band).c_str());
  else
    std::printf("3 amend: prefix = empty; band = attn(q_m, %s) [%lld keys]: %s\n",
                range_str(r.band_begin, r.band_end).c_str(), (long long)(r.band_end - r.band_begin),
                lse_str(e.band).c_str());
  const auto slot = [&] {
    std::printf(" -> slot %lld mod %lld = %lld, chain depth %lld\n", m, (long long)e.ring,
                (long long)(e.m % e.ring), (long long)r.depth);
  };
  const auto complete = [&] {
    std::printf("5 complete: sinks attn(q_m, %s): %s; tail attn(q_m, %s) [%lld keys]: %s\n",
                range_str(0, r.sink_end).c_str(), lse_str(e.sink).c_str(),
                range_str(r.tail_begin, e.m + 1).c_str(), (long long)(e.m + 1 - r.tail_begin),
                lse_str(e.tail_state).c_str());
    std::printf("  out = (prefix (+) band (+) sinks) (+) tail: %s\n", lse_str(r.out).c_str());
  };
  if (!e.downdate) {
    std::printf("4 cache write: entry(%lld) = prefix (+) band over %s: %s", m,
                range_str(e.fem, e.em).c_str(), lse_str(e.cached).c_str());
    slot();
    complete();
  } else {
    // The paper's order: the output first, then the entry by removing what it must not hold.
    complete();
    std::printf(
        "4 cache write (downdate): W = sinks (+) tail: %s; t = e^(L_W - L_out) = %.6g, 1 - t = "
        "%.6g (condition 1/(1-t) = %.4g)\n",
        lse_str(e.w).c_str(), e.t, e.one_minus_t, e.condition);
    std::printf("  entry(%lld) = out (-) W over %s: %s (split form prefix (+) band: %s)", m,
                range_str(e.fem, e.em).c_str(), lse_str(e.entry_downdate).c_str(),
                lse_str(e.cached).c_str());
    slot();
  }
  std::printf("  keys read: %lld of %lld (%.1f%%)\n", (long long)r.keys_read, m + 1,
              100.0 * static_cast<double>(r.keys_read) / static_cast<double>(e.m + 1));
  if (!r.exact.is_empty())
    std::printf(
        "  vs exact full attention (FP64 oracle): %s; rel L2 %.3e, max |do| %.3e, |dL| %.3e\n",
        lse_str(r.exact).c_str(), r.rel_l2, r.max_abs, r.lse_err);
  if (!e.chain.empty()) {
    std::printf("  chain of entry(%lld):", m);
    for (const auto& c : e.chain) std::printf(" %lld%s", (long long)c.pos, c.hit ? " <-" : "");
    std::printf(" (%s: exact); depth %lld\n", e.chain.back().prompt ? "a prompt entry" : "a miss",
                (long long)r.depth);
  }
}

void to_json(tools::JsonWriter& js, const Explained& e) {
  const auto& r = e.rec;
  js.begin_object();
  js.value("m", e.m).value("head", e.head).value("kv_head", e.kv_head);
  js.value("E_m", e.em).value("Fe_E_m", e.fem).value("first_candidate", e.first_candidate);
  js.value("eligible", r.eligible).value("hit", r.hit);
  js.value("best_pos", r.best_pos).value("match_pos", r.match_pos);
  js.value("d2", r.d2).value("d2_fp64", r.d2_fp64).value("threshold", e.threshold);
  js.value("entry_begin", e.entry_begin).value("entry_end", e.entry_end);
  js.value("band_begin", r.band_begin).value("band_end", r.band_end);
  js.value("sink_end", r.sink_end).value("tail_begin", r.tail_begin);
  js.value("keys_read", r.keys_read).value("depth", r.depth);
  state_json(js, "L_prefix", r.prefix);
  state_json(js, "L_band", e.band);
  state_json(js, "L_sinks", e.sink);
  state_json(js, "L_tail", e.tail_state);
  state_json(js, "L_entry_split", e.cached);
  state_json(js, "L_out", r.out);
  state_json(js, "L_exact", r.exact);
  state_json(js, "L_W", e.w);
  state_json(js, "L_entry_downdate", e.entry_downdate);
  js.value("t", e.t).value("one_minus_t", e.one_minus_t).value("condition", e.condition);
  js.value("downdate", e.downdate);
  js.value("rel_l2", r.rel_l2).value("max_abs", r.max_abs).value("lse_err", r.lse_err);
  js.begin_array("chain");
  for (const auto& c : e.chain) {
    js.begin_object();
    js.value("pos", c.pos).value("band_begin", c.band_begin).value("band_end", c.band_end);
    js.value("hit", c.hit).value("prompt", c.prompt);
    js.end_object();
  }
  js.end_array();
  js.end_object();
}

}  // namespace mac::sim
