// The CPU reference served through the plugin ABI (verification/include/mac/verify/plugin_abi.h):
// docs/semantics.md §3 for one step, built from the reference's own pieces (mac::ref::canonical_d2
// for the match, mac::ref::attend<float> for band, sinks and tail, mac::ref::merge, the ranges of
// mac::step_ranges). The driver judges it with the FP32 reference's tight limits.
//
// The same source builds several plugins (plugins/CMakeLists.txt), each with one switch:
//   MACV_PRODUCTION            the production layout: BF16 output and ring o, base-2 LSE
//                              (the driver converts), and its own prefill (macv_prefill);
//                              docs/semantics.md §4's limits
//   MACV_UNREPORTED            reports no decisions (caps.decisions = 1): hit and match_pos
//                              are absent, the driver grades the values at its decisions
//   MACV_FAULT_TIE_NEWER       ties go to the newer candidate (must fail the tie family)
//   MACV_FAULT_PREVIOUS_OUTPUT returns the previous step's output (must fail)
//   MACV_FAULT_LSE_BASE2       writes a base-2 output LSE without declaring it (must fail)
//   MACV_FAULT_SEGFAULT        raises SIGSEGV in every step of a D = 256 case (ERROR cases)
//   MACV_FAULT_HANG            never returns from a step of a D = 256 case (ERROR on timeout)
//   MACV_FAULT_HANG_QUERY      never returns from macv_query (the load times out: bad input)
//   MACV_FAULT_CLAIMS_PLAIN    declares itself a plain decode kernel (decisions = 2: no ring)
//                              but reuses through a ring of its own (must fail: its outputs
//                              are not exact attention)
//   MACV_FAULT_CACHED_ANSWER   answers a (case shape, position, request, head) it has seen
//                              before with the output it computed then (passes one trial per
//                              case, fails --trials 2)
//   MACV_FAULT_GATE_NO_PROBE   the gate (semantics §3.5) never probes again: once a window
//                              switches it off, off_left stays P (must fail the gate family)
#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/ref/gate.hpp"
#include "mac/ref/match.hpp"
#include "mac/semantics.hpp"
#include "mac/verify/plugin_abi.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#ifndef MAC_GIT_COMMIT
#define MAC_GIT_COMMIT "unknown"
#endif

#ifndef MACV_PRODUCTION
#define MACV_PRODUCTION 0
#endif

namespace {

using mac::ref::AttnState;

#if MACV_PRODUCTION
constexpr int kValueDtype = MACV_BF16;  // output o and ring o
constexpr bool kBase2 = true;
#else
constexpr int kValueDtype = MACV_F32;
constexpr bool kBase2 = false;
#endif

const char* plugin_name() {
#if MACV_PRODUCTION
  return "reference-fp32/production-abi";
#elif MACV_UNREPORTED
  return "reference-fp32/decisions-unreported";
#elif MACV_FAULT_TIE_NEWER
  return "reference-fp32/fault:tie-newer";
#elif MACV_FAULT_PREVIOUS_OUTPUT
  return "reference-fp32/fault:previous-output";
#elif MACV_FAULT_LSE_BASE2
  return "reference-fp32/fault:lse-base2";
#elif MACV_FAULT_SEGFAULT
  return "reference-fp32/fault:segfault";
#elif MACV_FAULT_HANG
  return "reference-fp32/fault:hang";
#elif MACV_FAULT_HANG_QUERY
  return "reference-fp32/fault:hang-query";
#elif MACV_FAULT_CACHED_ANSWER
  return "reference-fp32/fault:cached-answer";
#elif MACV_FAULT_GATE_NO_PROBE
  return "reference-fp32/fault:gate-no-probe";
#elif MACV_FAULT_CLAIMS_PLAIN
  return "reference-fp32/fault:claims-plain";
#else
  return "reference-fp32";
#endif
}

/*! Element (i0, i1, …) of a strided tensor. */
template <typename T, typename... I>
T* at(const macv_tensor& t, I... idx) {
  const int64_t i[] = {static_cast<int64_t>(idx)...};
  int64_t e = 0;
  for (size_t k = 0; k < sizeof...(I); ++k) e += i[k] * t.strides[k];
  return static_cast<T*>(t.data) + e;
}

template <typename... I>
float load(const macv_tensor& t, I... idx) {
  if (t.dtype == MACV_BF16) return mac::ref::bf16_from_bits(*at<uint16_t>(t, idx...));
  return *at<float>(t, idx...);
}

template <typename... I>
void store(const macv_tensor& t, float x, I... idx) {
  if (t.dtype == MACV_BF16)
    *at<uint16_t>(t, idx...) = mac::ref::bf16_bits(mac::ref::round_bf16(x));
  else
    *at<float>(t, idx...) = x;
}

float lse_out(double lse) { return static_cast<float>(kBase2 ? mac::lse_to_log2(lse) : lse); }
double lse_in(float lse) { return kBase2 ? mac::lse_from_log2(static_cast<double>(lse)) : lse; }

/*! The gate's configuration (semantics §3.5) from the case's parameters. */
mac::GateConfig gate_config(const macv_params& p) {
  mac::GateConfig g;
  g.window = p.gate_window;
  g.probe = p.gate_probe;
  g.margin = p.gate_margin;
  g.min_hit = p.gate_min_hit;
  g.fixed_bytes = p.gate_fixed_bytes;
  g.num_q_heads = p.num_q_heads;
  g.num_kv_heads = p.num_kv_heads;
  g.head_dim = p.head_dim;
  g.ring = p.ring;
  g.tail = p.tail;
  g.sinks = p.sinks;
  return g;
}

/*! Request b's row (bytes_mac, bytes_full, hits, steps, off_left) of gate_state; absent (the
 *  gate off): the zero state, on which gate_mode of window 0 is kNone. */
mac::GateState load_gate(const macv_tensor& t, int64_t b) {
  mac::GateState s;
  if (!t.data) return s;
  s.bytes_mac = *at<int64_t>(t, b, 0);
  s.bytes_full = *at<int64_t>(t, b, 1);
  s.hits = *at<int64_t>(t, b, 2);
  s.steps = static_cast<int32_t>(*at<int64_t>(t, b, 3));
  s.off_left = static_cast<int32_t>(*at<int64_t>(t, b, 4));
  return s;
}

void store_gate(const macv_tensor& t, int64_t b, const mac::GateState& s) {
  *at<int64_t>(t, b, 0) = s.bytes_mac;
  *at<int64_t>(t, b, 1) = s.bytes_full;
  *at<int64_t>(t, b, 2) = s.hits;
  *at<int64_t>(t, b, 3) = s.steps;
  *at<int64_t>(t, b, 4) = s.off_left;
}

int fail(char* err, size_t n, const std::string& what) {
  std::snprintf(err, n, "%s", what.c_str());
  return 1;
}

/*! Keys and values [0, kv_len) of request b gathered from the paged cache (BF16 → float). */
mac::ref::LayerData gather(const macv_params& p, const macv_tensor& kc, const macv_tensor& vc,
                           const macv_tensor& pt, int64_t b, int64_t kv_len) {
  mac::ref::LayerData L;
  L.tokens = kv_len;
  L.num_q_heads = p.num_q_heads;
  L.num_kv_heads = p.num_kv_heads;
  L.head_dim = p.head_dim;
  L.k.resize(static_cast<size_t>(kv_len * p.num_kv_heads * p.head_dim));
  L.v.resize(L.k.size());
  const bool nhd = p.kv_layout == MACV_KV_NHD;
  for (int64_t t = 0; t < kv_len; ++t) {
    const int64_t page = *at<int32_t>(pt, b, t / p.page_size), row = t % p.page_size;
    for (int64_t hk = 0; hk < p.num_kv_heads; ++hk) {
      const uint16_t* k = nhd ? at<uint16_t>(kc, page, row, hk) : at<uint16_t>(kc, page, hk, row);
      const uint16_t* v = nhd ? at<uint16_t>(vc, page, row, hk) : at<uint16_t>(vc, page, hk, row);
      float* kd = L.k.data() + (t * p.num_kv_heads + hk) * p.head_dim;
      float* vd = L.v.data() + (t * p.num_kv_heads + hk) * p.head_dim;
      for (int64_t d = 0; d < p.head_dim; ++d) {
        kd[d] = mac::ref::bf16_from_bits(k[d]);
        vd[d] = mac::ref::bf16_from_bits(v[d]);
      }
    }
  }
  return L;
}

#if MACV_FAULT_CACHED_ANSWER
/*! Outputs (o then lse) by case parameters, position, request and head: what a kernel keyed
 *  on the shape of its call would replay. It lives as long as the worker process. */
std::map<std::string, std::vector<float>>& answers() {
  static std::map<std::string, std::vector<float>> a;
  return a;
}
std::string answer_key(const macv_params& p, int64_t m, int64_t b, int64_t h) {
  std::string k(reinterpret_cast<const char*>(&p), sizeof p);
  for (int64_t x : {m, b, h}) k.append(reinterpret_cast<const char*>(&x), sizeof x);
  return k;
}
#endif

/*! The D BF16 values starting at `p` as floats. */
std::vector<float> row(const uint16_t* p, int64_t D) {
  std::vector<float> v(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) v[static_cast<size_t>(d)] = mac::ref::bf16_from_bits(p[d]);
  return v;
}

}  // namespace

struct macv_handle {
  macv_params p;
  std::vector<float> prev_o, prev_lse;  // MACV_FAULT_PREVIOUS_OUTPUT only
#if MACV_FAULT_CLAIMS_PLAIN
  // The ring the driver does not hand a plain decode kernel, kept here: head-major
  // [B, Hq, M, D] q̃ (BF16 bits) and o (FP32), [B, Hq, M] L and position; and hit, match_pos.
  std::vector<uint16_t> ring_q;
  std::vector<float> ring_o, ring_lse;
  std::vector<int64_t> ring_pos, match_pos;
  std::vector<uint8_t> hit;
  int64_t vec_shape[4], vec_strides[4], slot_shape[3], slot_strides[3], out_shape[2],
      out_strides[2];
#endif
};

extern "C" {

int32_t macv_abi_version(void) { return MACV_ABI_VERSION; }

int32_t macv_query(macv_caps* c, char*, size_t) {
#if MACV_FAULT_HANG_QUERY
  for (;;) pause();
#endif
  std::snprintf(c->name, sizeof c->name, "%s", plugin_name());
  std::snprintf(c->version, sizeof c->version, "%s", MAC_GIT_COMMIT);
  c->device = MACV_DEVICE_CPU;
  // docs/semantics.md §4's head dims (canonical_d2 needs D a multiple of 16).
  for (int d : mac::kHeadDims) c->head_dims[c->num_head_dims++] = d;
  c->kv_layouts = MACV_KV_NHD | MACV_KV_HND;
  c->ring_layouts = MACV_RING_HEAD_MAJOR | MACV_RING_SLOT_MAJOR;
  c->sinks = 1;
  c->out_dtype = kValueDtype;
  c->ring_o_dtype = kValueDtype;
  c->lse_base2 = kBase2 ? 1 : 0;
  c->strided_io = 1;
  c->reports_keys_read = 1;
  c->writes_ring = 1;
  c->prefills = MACV_PRODUCTION ? 1 : 0;
  c->tight_tolerances = MACV_PRODUCTION ? 0 : 1;
  c->policies = MACV_POLICY_DEPTH_CAP | MACV_POLICY_REFRESH | MACV_POLICY_GATE;  // §3.3, §3.5
#if MACV_UNREPORTED
  if (MACV_CAPS_HAS(c, decisions)) c->decisions = MACV_DECISIONS_UNREPORTED;
#endif
#if MACV_FAULT_CLAIMS_PLAIN
  c->reports_keys_read = 0;  // its keys read would give it away: only the values may
  c->writes_ring = 0;
  c->policies = 0;
  if (MACV_CAPS_HAS(c, decisions)) c->decisions = MACV_DECISIONS_EXACT;
#endif
  return 0;
}

int32_t macv_create(const macv_params* p, void*, macv_handle** out, char* err, size_t n) {
  if (!mac::supported_head_dim(p->head_dim))
    return fail(err, n, "head_dim " + std::to_string(p->head_dim) + " is not 64, 128 or 256");
  *out = new macv_handle{};
  (*out)->p = *p;
#if MACV_FAULT_CLAIMS_PLAIN
  macv_handle& h = **out;
  const int64_t B = p->batch, Hq = p->num_q_heads, M = p->ring, D = p->head_dim;
  h.ring_q.assign(static_cast<size_t>(B * Hq * M * D), 0x7FC0);
  h.ring_o.assign(h.ring_q.size(), std::nanf(""));
  h.ring_lse.assign(static_cast<size_t>(B * Hq * M), std::nanf(""));
  h.ring_pos.assign(h.ring_lse.size(), -1);  // empty: no prompt entries, only decode steps'
  h.hit.assign(static_cast<size_t>(B * Hq), 0);
  h.match_pos.assign(h.hit.size(), -1);
  const int64_t vs[4] = {B, Hq, M, D}, vst[4] = {Hq * M * D, M * D, D, 1};
  const int64_t ss[3] = {B, Hq, M}, sst[3] = {Hq * M, M, 1}, os[2] = {B, Hq}, ost[2] = {Hq, 1};
  std::copy(vs, vs + 4, h.vec_shape);
  std::copy(vst, vst + 4, h.vec_strides);
  std::copy(ss, ss + 3, h.slot_shape);
  std::copy(sst, sst + 3, h.slot_strides);
  std::copy(os, os + 2, h.out_shape);
  std::copy(ost, ost + 2, h.out_strides);
#endif
  return 0;
}

void macv_destroy(macv_handle* h) { delete h; }

namespace {
int32_t step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, char* err,
             size_t n) {
  const macv_params& p = h->p;
  const int64_t B = p.batch, Hq = p.num_q_heads, D = p.head_dim, M = p.ring;
  const int64_t G = Hq / p.num_kv_heads, r = p.tail, F = p.sinks;
#if MACV_FAULT_SEGFAULT
  if (D == 256) raise(SIGSEGV);
#endif
#if MACV_FAULT_HANG
  while (D == 256) pause();
#endif
  if (in->q.strides[2] != 1 || out->o.strides[2] != 1)
    return fail(err, n, "q and o need a contiguous head dimension");
  const mac::GateConfig g = gate_config(p);  // the gate of §3.5 (window 0: off)
  for (int64_t b = 0; b < B; ++b) {
    const int64_t m = *at<int64_t>(in->position, b);
    const bool ready = *at<uint8_t>(in->ready, b) != 0;
    const auto layer = gather(p, in->k_cache, in->v_cache, in->page_table, b, m + 1);
    const bool eligible = m >= p.gen_min && ready && m >= 1;  // docs/semantics.md §3 step 1
    // The gate (§3.5) decides from the state the earlier steps left in gate_state; an
    // ineligible step is kNone and leaves it alone.
    mac::GateState gs = load_gate(in->gate_state, b);
    const mac::GateMode mode = eligible ? mac::gate_mode(g, gs, m) : mac::GateMode::kNone;
    const bool gated = mac::gate_gated(mode);
    int64_t hits = 0, group_keys = 0, lo = m + 1;
    for (int64_t h2 = 0; h2 < Hq; ++h2) {
      const auto qt = row(at<uint16_t>(in->q_tilde, b, h2, 0), D);
      const auto q = row(at<uint16_t>(in->q, b, h2, 0), D);
      // 2. Match: argmin (d2, p) over the candidates whose slot holds them, ascending p with a
      // strict '<' (ties to the older); a NaN never displaces a number; validity second.
      int64_t best = -1;
      float bd = std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = std::max<int64_t>(0, m - M); eligible && !gated && c < m; ++c) {
        if (*at<int64_t>(in->ring_pos, b, h2, c % M) != c) continue;
        const float d2 = mac::ref::canonical_d2(
            qt.data(), row(at<uint16_t>(in->ring_q, b, h2, c % M, 0), D).data(), D);
#if MACV_FAULT_TIE_NEWER
        const bool better = d2 <= bd;
#else
        const bool better = d2 < bd;
#endif
        if (best < 0 || better || (std::isnan(bd) && !std::isnan(d2))) {
          best = c;
          bd = d2;
        }
      }
      AttnState<float> prefix = AttnState<float>::empty(D);
      bool hit = false;
      int32_t depth = 0;  // of entry(m)
      if (best >= 0 && bd < p.threshold) {
        const float L = static_cast<float>(lse_in(*at<float>(in->ring_lse, b, h2, best % M)));
        const bool usable =
            L > -std::numeric_limits<float>::infinity() && !(F > 0 && mac::prefix_end(best, r) < F);
        // Policies (semantics §3.3): a due refresh or a capped chain makes it a plain miss.
        const int32_t best_depth =
            in->ring_depth.data ? *at<int32_t>(in->ring_depth, b, h2, best % M) : 0;
        const bool forced = mac::refresh_due<int64_t>(m, h2, Hq, p.refresh) ||
                            mac::depth_capped<int64_t>(best_depth, p.depth_cap);
        if (usable && !forced) {
          depth = best_depth + 1;
          hit = true;
          prefix.lse = L;
          for (int64_t d = 0; d < D; ++d) prefix.o[d] = load(in->ring_o, b, h2, best % M, d);
        }
      }
      // 3–5. Amend, cache write, complete.
      const auto k = mac::step_ranges(m, hit ? best : -1, r, F);
      const int64_t hk = h2 / G;
      // The byte model: each KV group reads [0, Fe(E(m))) and [lo, m], lo its smallest band start.
      hits += hit;
      lo = std::min(lo, k.band_begin);
      if (h2 % G == G - 1) {
        group_keys += mac::gate_group_keys(m, k.sink_end, lo);
        lo = m + 1;
      }
      const double s = p.softmax_scale;
      const auto band = mac::ref::attend<float>(layer, hk, q.data(), s, k.band_begin, k.band_end);
      const auto entry = mac::ref::merge(prefix, band);
      const auto sink = mac::ref::attend<float>(layer, hk, q.data(), s, 0, k.sink_end);
      const auto tail = mac::ref::attend<float>(layer, hk, q.data(), s, k.tail_begin, k.kv_len);
      const auto res = mac::ref::merge(mac::ref::merge(entry, sink), tail);
      if (ready) {
        const int64_t j = m % M;
        std::memcpy(at<uint16_t>(in->ring_q, b, h2, j, 0), at<uint16_t>(in->q_tilde, b, h2, 0),
                    static_cast<size_t>(D) * 2);
        for (int64_t d = 0; d < D; ++d)
          store(in->ring_o, entry.is_empty() ? 0.f : entry.o[d], b, h2, j, d);
        *at<float>(in->ring_lse, b, h2, j) = lse_out(entry.lse);
        *at<int64_t>(in->ring_pos, b, h2, j) = m;
        if (in->ring_depth.data) *at<int32_t>(in->ring_depth, b, h2, j) = depth;
      }
      if (out->hit.data) {  // absent unless caps.decisions is MACV_DECISIONS_REPORTED
        *at<uint8_t>(out->hit, b, h2) = hit ? 1 : 0;
        *at<int64_t>(out->match_pos, b, h2) = hit ? best : -1;
      }
      if (out->keys_read.data) *at<int64_t>(out->keys_read, b, h2) = k.keys_read();
      float o_lse = lse_out(res.lse);
#if MACV_FAULT_LSE_BASE2
      o_lse = static_cast<float>(mac::lse_to_log2(static_cast<double>(res.lse)));
#endif
      std::vector<float> o(res.o.data(), res.o.data() + D);
#if MACV_FAULT_PREVIOUS_OUTPUT
      // Answers with what it computed one step earlier for this (request, head).
      const size_t e = static_cast<size_t>(b * Hq + h2);
      if (h->prev_o.empty()) {
        h->prev_o.assign(static_cast<size_t>(B * Hq * D), std::nanf(""));
        h->prev_lse.assign(static_cast<size_t>(B * Hq), std::nanf(""));
      }
      std::vector<float> now = o;
      const float now_lse = o_lse;
      if (!std::isnan(h->prev_lse[e])) {
        o.assign(h->prev_o.begin() + static_cast<int64_t>(e) * D,
                 h->prev_o.begin() + static_cast<int64_t>(e + 1) * D);
        o_lse = h->prev_lse[e];
      }
      std::copy(now.begin(), now.end(), h->prev_o.begin() + static_cast<int64_t>(e) * D);
      h->prev_lse[e] = now_lse;
#endif
#if MACV_FAULT_CACHED_ANSWER
      auto [it, fresh] = answers().try_emplace(answer_key(p, m, b, h2), o);
      if (fresh)
        it->second.push_back(o_lse);
      else
        o_lse = it->second.back();
      o.assign(it->second.begin(), it->second.begin() + D);
#endif
      for (int64_t d = 0; d < D; ++d) store(out->o, o[static_cast<size_t>(d)], b, h2, d);
      *at<float>(out->lse, b, h2) = o_lse;
    }
    if (in->gate_state.data) {
      const int64_t full = mac::gate_full_bytes(g, m);
      const int64_t bytes = mac::gate_step_bytes(g, m, eligible && !gated, ready, group_keys);
#if MACV_FAULT_GATE_NO_PROBE
      if (mode == mac::GateMode::kOff) ++gs.off_left;  // undoes the countdown: never probes
#endif
      mac::gate_update(g, gs, mode, hits, bytes, full);
      store_gate(in->gate_state, b, gs);
    }
  }
  return 0;
}
}  // namespace

int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, void*,
                  char* err, size_t n) {
  try {  // no C++ exception may cross the C ABI
#if MACV_FAULT_CLAIMS_PLAIN
    // The driver's ring and decision tensors are absent (NULL): substitute the handle's.
    auto view = [](void* data, int32_t dtype, int32_t ndim, const int64_t* shape,
                   const int64_t* st) {
      return macv_tensor{data, dtype, ndim, shape, st, MACV_DEVICE_CPU, 0};
    };
    macv_step_inputs own = *in;
    own.ring_q = view(h->ring_q.data(), MACV_BF16, 4, h->vec_shape, h->vec_strides);
    own.ring_o = view(h->ring_o.data(), MACV_F32, 4, h->vec_shape, h->vec_strides);
    own.ring_lse = view(h->ring_lse.data(), MACV_F32, 3, h->slot_shape, h->slot_strides);
    own.ring_pos = view(h->ring_pos.data(), MACV_I64, 3, h->slot_shape, h->slot_strides);
    macv_step_outputs mine = *out;
    mine.hit = view(h->hit.data(), MACV_U8, 2, h->out_shape, h->out_strides);
    mine.match_pos = view(h->match_pos.data(), MACV_I64, 2, h->out_shape, h->out_strides);
    return step(h, &own, &mine, err, n);
#endif
    return step(h, in, out, err, n);
  } catch (const std::exception& e) {
    return fail(err, n, e.what());
  }
}

#if MACV_PRODUCTION
/*! The prompt entries: attn(q_p, [Fe(E(p)), E(p))) in FP32, stored as the ring declares. */
int32_t macv_prefill(macv_handle* h, const macv_prefill_inputs* in, void*, char* err,
                     size_t n) try {
  const macv_params& p = h->p;
  const int64_t Hq = p.num_q_heads, D = p.head_dim, M = p.ring, G = Hq / p.num_kv_heads;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t first = *at<int64_t>(in->first_pos, b), count = *at<int64_t>(in->count, b);
    const auto layer = gather(p, in->k_cache, in->v_cache, in->page_table, b, first + count);
    for (int64_t j = 0; j < count; ++j)
      for (int64_t h2 = 0; h2 < Hq; ++h2) {
        const int64_t pos = first + j, e = mac::prefix_end(pos, p.tail);
        const auto q = row(at<uint16_t>(in->q, b, j, h2, 0), D);
        const auto st = mac::ref::attend<float>(layer, h2 / G, q.data(), p.softmax_scale,
                                                mac::sink_end(p.sinks, e), e);
        std::memcpy(at<uint16_t>(in->ring_q, b, h2, pos % M, 0),
                    at<uint16_t>(in->q_tilde, b, j, h2, 0), static_cast<size_t>(D) * 2);
        for (int64_t d = 0; d < D; ++d)
          store(in->ring_o, st.is_empty() ? 0.f : st.o[d], b, h2, pos % M, d);
        *at<float>(in->ring_lse, b, h2, pos % M) = lse_out(st.lse);
        *at<int64_t>(in->ring_pos, b, h2, pos % M) = pos;
        if (in->ring_depth.data) *at<int32_t>(in->ring_depth, b, h2, pos % M) = 0;
      }
  }
  return 0;
} catch (const std::exception& e) {
  return fail(err, n, e.what());
}
#endif

}  // extern "C"
