/* minimal_plugin.c: a complete mac-verify plugin in plain C99.
 *
 * One call of macv_step is one MAC decode step of docs/semantics.md §3 for every request and query
 * head, written to be read, not to be fast: attention in double precision, one head at a time, the
 * keys read straight from the driver's paged cache. It is the worked example of
 * docs/verification.md; CI builds it and certifies it on the smoke subset:
 *
 *     mac-verify --impl plugin:build/plugins/mac_plugin_minimal_c.so --subset smoke
 *
 * What a plugin must do, in the order this file does it:
 *   1. macv_abi_version, macv_query: say which ABI it was built against and what it supports
 *      (here: D = 64, 128, 256, any GQA ratio and page size, the NHD cache, the head-major
 *      ring, FP32 output and ring states, natural-log LSE; judged by the tight FP32 limits).
 *   2. macv_create / macv_destroy: a handle per case, holding only the case's parameters;
 *      everything that carries over from one step to the next lives in the driver's ring.
 *   3. macv_step: per request b (position m) and query head h:
 *        eligible  m ≥ gen_min, request ready, m ≥ 1
 *        match     best = argmin over candidates p ∈ [max(0, m−M), m) whose ring slot p mod M
 *                  holds p, of (d2(p), p), with the canonical FP32 distance of docs/semantics.md
 * §3.1; hit iff d2(best) < thr and entry(best) is usable (no second-best search) amend     hit:
 * prefix = entry(best), band = attn(q, [E(best), E(m))); miss: prefix = empty, band = attn(q,
 * [Fe(E(m)), E(m))) write     if ready: slot m mod M := (q̃_m, prefix ⊕ band, m) complete  out =
 * ((prefix ⊕ band) ⊕ attn(q, [0, Fe(E(m))))) ⊕ attn(q, [E(m), m]) with E(p) = max(0, p + 1 − r) and
 * Fe(e) = min(F, e).
 */
#include "mac/verify/plugin_abi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_D 256

struct macv_handle {
  macv_params p;
};

/* ---- Reading the driver's tensors ------------------------------------------------------ */

/* Address of element idx[0..ndim-1] of a strided tensor (strides in elements). */
static void* at(const macv_tensor* t, const int64_t* idx) {
  static const size_t elem_size[] = {4, 2, 4, 8, 1, 8}; /* indexed by enum macv_dtype */
  int64_t e = 0;
  int k;
  for (k = 0; k < t->ndim; ++k) e += idx[k] * t->strides[k];
  return (char*)t->data + e * (int64_t)elem_size[t->dtype];
}

/* A bfloat16 is the upper half of a float32. */
static float bf16_to_float(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Key (k = 1) or value (k = 0) of token t of request b, KV head hk, element d. The NHD cache
 * is [pages, page_size, Hkv, D]; token t is on page page_table[b][t / page_size]. */
static double kv(const macv_step_inputs* in, const macv_params* p, int k, int64_t b, int64_t t,
                 int64_t hk, int64_t d) {
  const int64_t slot[2] = {b, t / p->page_size};
  const int64_t page = *(const int32_t*)at(&in->page_table, slot);
  const int64_t idx[4] = {page, t % p->page_size, hk, d};
  return bf16_to_float(*(const uint16_t*)at(k ? &in->k_cache : &in->v_cache, idx));
}

/* ---- The attention state (docs/semantics.md §2)
 * --------------------------------------------------- */

typedef struct {
  double o[MAX_D]; /* normalised output */
  double lse;      /* natural log of the softmax denominator; -INFINITY: the empty state */
} state;

static void make_empty(state* s, int D) {
  int d;
  for (d = 0; d < D; ++d) s->o[d] = 0;
  s->lse = -INFINITY;
}

/* a := a ⊕ b (disjoint key sets): L = μ + ln(e^{L1−μ} + e^{L2−μ}), o = e^{L1−L}·o1 + e^{L2−L}·o2.
 * An empty side leaves the other. */
static void merge(state* a, const state* b, int D) {
  double mu, L, wa, wb;
  int d;
  if (!(b->lse > -INFINITY)) return;
  if (!(a->lse > -INFINITY)) {
    *a = *b;
    return;
  }
  mu = a->lse > b->lse ? a->lse : b->lse;
  L = mu + log(exp(a->lse - mu) + exp(b->lse - mu));
  wa = exp(a->lse - L);
  wb = exp(b->lse - L);
  for (d = 0; d < D; ++d) a->o[d] = wa * a->o[d] + wb * b->o[d];
  a->lse = L;
}

/* attn(q, [first, end)) over KV head hk of request b: L = ln Σ_t exp(s·q·k_t),
 * o = Σ_t exp(s·q·k_t − L)·v_t. Two passes: the largest logit, then the weights. */
static void attend(const macv_step_inputs* in, const macv_params* p, int64_t b, int64_t hk,
                   const double* q, int64_t first, int64_t end, state* out) {
  const int D = p->head_dim;
  double* logit;
  double mx = -INFINITY, sum = 0;
  int64_t t;
  int d;
  make_empty(out, D);
  if (first >= end) return;
  logit = (double*)malloc((size_t)(end - first) * sizeof *logit);
  for (t = first; t < end; ++t) {
    double dot = 0;
    for (d = 0; d < D; ++d) dot += q[d] * kv(in, p, 1, b, t, hk, d);
    logit[t - first] = p->softmax_scale * dot;
    if (logit[t - first] > mx) mx = logit[t - first];
  }
  for (t = first; t < end; ++t) {
    const double w = exp(logit[t - first] - mx);
    sum += w;
    for (d = 0; d < D; ++d) out->o[d] += w * kv(in, p, 0, b, t, hk, d);
  }
  for (d = 0; d < D; ++d) out->o[d] /= sum;
  out->lse = mx + log(sum);
  free(logit);
}

/* ---- The match (docs/semantics.md §3.1)
 * ----------------------------------------------------------- */

/* The canonical FP32 squared distance between two BF16 vectors: D/8 lanes, lane l adds the
 * squares of dims 8l … 8l+7 in order with fmaf from 0, then the lanes combine by an xor
 * butterfly with offsets D/16, …, 2, 1. Every FP32 operation is written out, so the result is
 * bit-identical to the reference's and the CUDA kernel's (compiled without FMA contraction). */
static float canonical_d2(const uint16_t* a, const uint16_t* b, int D) {
  float acc[MAX_D / 8], next[MAX_D / 8];
  const int lanes = D / 8;
  int l, i, off;
  for (l = 0; l < lanes; ++l) {
    float s = 0.0f;
    for (i = 8 * l; i < 8 * l + 8; ++i) {
      const float diff = bf16_to_float(a[i]) - bf16_to_float(b[i]);
      s = fmaf(diff, diff, s);
    }
    acc[l] = s;
  }
  for (off = lanes / 2; off >= 1; off /= 2) {
    for (l = 0; l < lanes; ++l) next[l] = acc[l] + acc[l ^ off];
    memcpy(acc, next, (size_t)lanes * sizeof acc[0]);
  }
  return acc[0];
}

static int64_t prefix_end(int64_t p, int64_t r) { return p + 1 - r > 0 ? p + 1 - r : 0; } /* E(p) */
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- The ABI entry points -------------------------------------------------------------- */

int32_t macv_abi_version(void) { return MACV_ABI_VERSION; }

int32_t macv_query(macv_caps* c, char* err, size_t err_len) {
  (void)err;
  (void)err_len;
  /* The driver has zeroed *c: a list left empty means "any value". */
  snprintf(c->name, sizeof c->name, "minimal-c");
  snprintf(c->version, sizeof c->version, "1");
  c->device = MACV_DEVICE_CPU;
  c->head_dims[0] = 64;
  c->head_dims[1] = 128;
  c->head_dims[2] = 256;
  c->num_head_dims = 3;
  c->kv_layouts = MACV_KV_NHD;
  c->ring_layouts = MACV_RING_HEAD_MAJOR;
  c->sinks = 1;
  c->out_dtype = MACV_F32;
  c->ring_o_dtype = MACV_F32;
  c->strided_io = 1; /* every access goes through at(), which honours the strides */
  c->reports_keys_read = 1;
  c->writes_ring = 1;
  c->tight_tolerances = 1; /* FP32 output and ring: judge it as the FP32 reference is */
  c->policies = 0; /* no depth cap, refresh (semantics §3.3) or gate (§3.5): NOT APPLICABLE */
  return 0;
}

int32_t macv_create(const macv_params* p, void* stream, macv_handle** out, char* err,
                    size_t err_len) {
  (void)stream;
  if (p->head_dim % 16 != 0 || p->head_dim > MAX_D) {
    snprintf(err, err_len, "head_dim %d is not a multiple of 16 up to %d", p->head_dim, MAX_D);
    return 1;
  }
  *out = (macv_handle*)malloc(sizeof **out);
  if (!*out) {
    snprintf(err, err_len, "out of memory");
    return 1;
  }
  (*out)->p = *p;
  return 0;
}

void macv_destroy(macv_handle* h) { free(h); }

int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, void* stream,
                  char* err, size_t err_len) {
  const macv_params* p = &h->p;
  const int D = p->head_dim;
  const int64_t M = p->ring, r = p->tail, F = p->sinks, G = p->num_q_heads / p->num_kv_heads;
  int64_t b, hq;
  (void)stream;
  (void)err;
  (void)err_len;
  for (b = 0; b < p->batch; ++b) {
    const int64_t ib[1] = {b};
    const int64_t m = *(const int64_t*)at(&in->position, ib);
    const int ready = *(const uint8_t*)at(&in->ready, ib) != 0;
    const int eligible = m >= p->gen_min && ready && m >= 1;
    const int64_t Em = prefix_end(m, r), Fem = min64(F, Em);
    for (hq = 0; hq < p->num_q_heads; ++hq) {
      const int64_t ih[3] = {b, hq, 0}, io[2] = {b, hq};
      const uint16_t* q_tilde = (const uint16_t*)at(&in->q_tilde, ih);
      const uint16_t* q_bf16 = (const uint16_t*)at(&in->q, ih);
      double q[MAX_D];
      state prefix, band, sink, tail, out_state;
      int64_t best = -1, c, band_first, slot[3], d;
      float best_d2 = NAN;
      int hit = 0;
      for (d = 0; d < D; ++d) q[d] = bf16_to_float(q_bf16[d]);

      /* Match: argmin (d2, p) over the candidates; ascending p and a strict '<' send ties to
       * the older position, and a NaN never displaces a number. */
      for (c = m - M > 0 ? m - M : 0; eligible && c < m; ++c) {
        float d2;
        slot[0] = b;
        slot[1] = hq;
        slot[2] = c % M;
        if (*(const int64_t*)at(&in->ring_pos, slot) != c) continue; /* slot holds another */
        {
          const int64_t iq[4] = {b, hq, c % M, 0};
          d2 = canonical_d2(q_tilde, (const uint16_t*)at(&in->ring_q, iq), D);
        }
        if (best < 0 || d2 < best_d2 || (isnan(best_d2) && !isnan(d2))) {
          best = c;
          best_d2 = d2;
        }
      }
      /* Hit iff below the threshold (strict) and the nearest entry is usable; else a miss. */
      make_empty(&prefix, D);
      if (best >= 0 && best_d2 < p->threshold) {
        const int64_t is[3] = {b, hq, best % M};
        const float L = *(const float*)at(&in->ring_lse, is);
        if (L > -INFINITY && !(F > 0 && prefix_end(best, r) < F)) {
          hit = 1;
          prefix.lse = L;
          for (d = 0; d < D; ++d) {
            const int64_t iv[4] = {b, hq, best % M, d};
            prefix.o[d] = *(const float*)at(&in->ring_o, iv);
          }
        }
      }
      /* Amend: the band from the prefix's end (or the sinks' end on a miss) to E(m). */
      band_first = hit ? prefix_end(best, r) : Fem;
      attend(in, p, b, hq / G, q, band_first, Em, &band);
      merge(&prefix, &band, D); /* prefix now holds entry(m) = prefix ⊕ band */

      /* Cache write (ready only): slot m mod M := (q̃_m, entry(m), m), after the read above. */
      if (ready) {
        const int64_t is[3] = {b, hq, m % M}, iq[4] = {b, hq, m % M, 0};
        memcpy(at(&in->ring_q, iq), q_tilde, (size_t)D * 2);
        for (d = 0; d < D; ++d) {
          const int64_t iv[4] = {b, hq, m % M, d};
          *(float*)at(&in->ring_o, iv) = (float)prefix.o[d];
        }
        *(float*)at(&in->ring_lse, is) = (float)prefix.lse;
        *(int64_t*)at(&in->ring_pos, is) = m;
      }

      /* Complete: out = (entry ⊕ sinks) ⊕ tail. */
      attend(in, p, b, hq / G, q, 0, Fem, &sink);
      attend(in, p, b, hq / G, q, Em, m + 1, &tail);
      out_state = prefix;
      merge(&out_state, &sink, D);
      merge(&out_state, &tail, D);
      for (d = 0; d < D; ++d) {
        const int64_t iv[3] = {b, hq, d};
        *(float*)at(&out->o, iv) = (float)out_state.o[d];
      }
      *(float*)at(&out->lse, io) = (float)out_state.lse;
      *(uint8_t*)at(&out->hit, io) = (uint8_t)hit;
      *(int64_t*)at(&out->match_pos, io) = hit ? best : -1;
      if (out->keys_read.data)
        *(int64_t*)at(&out->keys_read, io) = (Em - band_first) + Fem + (m + 1 - Em);
    }
  }
  return 0;
}
