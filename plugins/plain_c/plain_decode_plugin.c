/* plain_decode_plugin.c: a plain decode kernel certified through mac-verify, in C99.
 *
 * A decode kernel that never reuses: every step is exact attention attn(q_m, [0, m]) of every
 * request and query head over the driver's paged cache, in double precision. It declares
 * caps.decisions = MACV_DECISIONS_EXACT, so the driver hands it no ring and no hit/match_pos
 * outputs and grades its o and lse against the FP64 oracle's exact attention on every case
 * whose shape it supports (plugin_abi.h; docs/certify.md "Kernels that do not report
 * decisions"). CI certifies it on the smoke subset:
 *
 *     mac-verify --impl plugin:build/plugins/mac_plugin_plain_c.so --subset smoke
 */
#include "mac/verify/plugin_abi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_D 256 /* the largest head dim of docs/semantics.md §4 */

struct macv_handle {
  macv_params p;
  double* logit; /* [max_context] scratch */
};

/* Address of element idx[0..ndim-1] of a strided tensor (strides in elements). */
static void* at(const macv_tensor* t, const int64_t* idx) {
  static const size_t elem_size[] = {4, 2, 4, 8, 1, 8}; /* indexed by enum macv_dtype */
  int64_t e = 0;
  int k;
  for (k = 0; k < t->ndim; ++k) e += idx[k] * t->strides[k];
  return (char*)t->data + e * (int64_t)elem_size[t->dtype];
}

static double bf16(const void* p) {
  const uint32_t u = (uint32_t)(*(const uint16_t*)p) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Row of token t of request b, KV head hk in k_cache or v_cache (either layout). */
static const void* kv_row(const macv_tensor* cache, const macv_step_inputs* in,
                          const macv_params* p, int64_t b, int64_t t, int64_t hk) {
  const int64_t slot[2] = {b, t / p->page_size};
  const int64_t page = *(const int32_t*)at(&in->page_table, slot), row = t % p->page_size;
  const int64_t nhd[4] = {page, row, hk, 0}, hnd[4] = {page, hk, row, 0};
  return at(cache, p->kv_layout == MACV_KV_NHD ? nhd : hnd);
}

int32_t macv_abi_version(void) { return MACV_ABI_VERSION; }

int32_t macv_query(macv_caps* c, char* err, size_t err_len) {
  if (!MACV_CAPS_HAS(c, decisions)) {
    snprintf(err, err_len, "this driver's macv_caps has no `decisions` field");
    return 1;
  }
  snprintf(c->name, sizeof c->name, "plain-decode-c");
  snprintf(c->version, sizeof c->version, "1");
  c->device = MACV_DEVICE_CPU;
  c->kv_layouts = MACV_KV_NHD | MACV_KV_HND;
  c->out_dtype = MACV_F32;
  c->strided_io = 1; /* every access goes through at(), which honours the strides */
  c->reports_keys_read = 1;
  c->tight_tolerances = 1;             /* FP32 output: judge it as the FP32 reference is */
  c->decisions = MACV_DECISIONS_EXACT; /* no ring, no reuse: writes_ring, policies stay 0 */
  return 0;
}

int32_t macv_create(const macv_params* p, void* stream, macv_handle** out, char* err,
                    size_t err_len) {
  (void)stream;
  if (p->head_dim > MAX_D) {
    snprintf(err, err_len, "head_dim %d above %d", p->head_dim, MAX_D);
    return 1;
  }
  *out = (macv_handle*)malloc(sizeof **out);
  if (*out) (*out)->logit = (double*)malloc((size_t)(p->max_context + 1) * sizeof(double));
  if (!*out || !(*out)->logit) {
    free(*out);
    snprintf(err, err_len, "out of memory");
    return 1;
  }
  (*out)->p = *p;
  return 0;
}

void macv_destroy(macv_handle* h) {
  free(h->logit);
  free(h);
}

/* o = Σ_t exp(s·q·k_t − L)·v_t, L = ln Σ_t exp(s·q·k_t) over t ∈ [0, m]: two passes, the largest
 * logit first. */
int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, void* stream,
                  char* err, size_t err_len) {
  const macv_params* p = &h->p;
  const int64_t D = p->head_dim, G = p->num_q_heads / p->num_kv_heads;
  int64_t b, hq, t, d;
  (void)stream;
  (void)err;
  (void)err_len;
  for (b = 0; b < p->batch; ++b) {
    const int64_t ib[1] = {b};
    const int64_t m = *(const int64_t*)at(&in->position, ib);
    for (hq = 0; hq < p->num_q_heads; ++hq) {
      const int64_t iq[3] = {b, hq, 0}, io[2] = {b, hq};
      const char* q = (const char*)at(&in->q, iq);
      double mx = -INFINITY, sum = 0, o[MAX_D] = {0};
      for (t = 0; t <= m; ++t) {
        const char* k = (const char*)kv_row(&in->k_cache, in, p, b, t, hq / G);
        double dot = 0;
        for (d = 0; d < D; ++d) dot += bf16(q + 2 * d) * bf16(k + 2 * d);
        h->logit[t] = p->softmax_scale * dot;
        if (h->logit[t] > mx) mx = h->logit[t];
      }
      for (t = 0; t <= m; ++t) {
        const char* v = (const char*)kv_row(&in->v_cache, in, p, b, t, hq / G);
        const double w = exp(h->logit[t] - mx);
        sum += w;
        for (d = 0; d < D; ++d) o[d] += w * bf16(v + 2 * d);
      }
      for (d = 0; d < D; ++d) {
        const int64_t iv[3] = {b, hq, d};
        *(float*)at(&out->o, iv) = (float)(o[d] / sum);
      }
      *(float*)at(&out->lse, io) = (float)(mx + log(sum));
      if (out->keys_read.data) *(int64_t*)at(&out->keys_read, io) = m + 1;
    }
  }
  return 0;
}
