// This project's CUDA kernels (mac::cuda::Engine, mac/cuda/mac_cuda.hpp) served through the
// plugin ABI (verification/include/mac/verify/plugin_abi.h). `mac-verify --mode gpu` certifies
// them through it, as any kernel is certified: the ABI is sufficient for the kernel that
// needs the most from it (paged KV in either layout, strided q/o/lse, its own prefill, CUDA
// graph capture of a step, full attention for the bit-identity of ineligible heads, device
// error flags, and the two K3 placements as variants).
//
// The ABI's tensors are the engine's own arrays, with three adaptations done on the device
// (glue.cu): kv_len (int32) and readiness (int32) from positions and the U8 ready flags before
// the step, keys read (int64) and the ring's positions (the engine keeps none) after it. Rows
// map to request slots 0 … B−1; a request that is not ready is given to the engine as ready = 0
// or as epochs that differ, alternately (glue.cu), so both gates of semantics §3.2 are certified.
#include "glue.hpp"
#include "mac/cuda/mac_cuda.hpp"
#include "mac/semantics.hpp"
#include "mac/verify/plugin_abi.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifndef MAC_GIT_COMMIT
#define MAC_GIT_COMMIT "unknown"
#endif

using namespace mac::cuda;

struct macv_handle {
  macv_params p;
  std::unique_ptr<Engine> engine, full;  // the MAC engine; full attention on a second one
  DeviceBuffer kv_len, ready32, slots, epochs, epoch_b, keys32, d2;
};

namespace {

int fail(char* err, size_t n, const std::string& what) {
  std::snprintf(err, n, "%s", what.c_str());
  return 1;
}

int fail(char* err, size_t n, const Status& s, const char* what) {
  return fail(err, n, std::string(what) + ": " + to_string(s.code) + ": " + s.message);
}

bool strides_are(const macv_tensor& t, std::initializer_list<int64_t> want) {
  size_t k = 0;
  for (int64_t w : want)
    if (t.strides[k++] != w) return false;
  return true;
}

/*! DecodeParams over the ABI's tensors (outputs: the step's, or full attention's when `o`
 *  and `lse` are given without diagnostics). Returns "" or what it cannot take. */
std::string decode_params(macv_handle* h, const macv_step_inputs* in, const macv_tensor& o,
                          const macv_tensor& lse, const macv_step_outputs* diag, DecodeParams* dp) {
  const macv_params& p = h->p;
  const int64_t Hq = p.num_q_heads, D = p.head_dim, M = p.ring, Hkv = p.num_kv_heads;
  DecodeParams d;
  d.batch = p.batch;
  if (!strides_are(in->q_tilde, {in->q.strides[0], in->q.strides[1], 1}))
    return "q_tilde's strides differ from q's";
  d.q_post = static_cast<const uint16_t*>(in->q.data);
  d.q_pre = static_cast<const uint16_t*>(in->q_tilde.data);
  d.q_row_stride = in->q.strides[0];
  d.q_head_stride = in->q.strides[1];
  d.k_cache = static_cast<const uint16_t*>(in->k_cache.data);
  d.v_cache = static_cast<const uint16_t*>(in->v_cache.data);
  d.num_pages = p.num_pages;
  d.page_size = p.page_size;
  const int64_t* ks = in->k_cache.strides;
  if (!strides_are(in->v_cache, {ks[0], ks[1], ks[2], 1}))
    return "v_cache's strides differ from k_cache's";
  const bool nhd = p.kv_layout == MACV_KV_NHD;
  d.kv_page_stride = ks[0];
  d.kv_token_stride = nhd ? ks[1] : ks[2];
  d.kv_head_stride = nhd ? ks[2] : ks[1];
  if (!strides_are(in->page_table, {p.max_pages_per_request, 1})) return "page_table is not packed";
  d.page_table = static_cast<const int32_t*>(in->page_table.data);
  d.max_pages_per_row = p.max_pages_per_request;
  d.kv_len = h->kv_len.as<int32_t>();
  d.softmax_scale = static_cast<float>(p.softmax_scale);
  d.tau = p.tau;
  d.ring = static_cast<int>(M);
  d.tail = static_cast<int>(p.tail);
  d.sinks = static_cast<int>(p.sinks);
  d.gen_min = static_cast<int>(p.gen_min);
  // The engine's ring is [R, M, Hq, D] / [R, M, Hq]: the ABI's slot-major layout, packed.
  if (!strides_are(in->ring_q, {M * Hq * D, D, Hq * D, 1}) ||
      !strides_are(in->ring_o, {M * Hq * D, D, Hq * D, 1}) ||
      !strides_are(in->ring_lse, {M * Hq, 1, Hq}) || !strides_are(in->ring_pos, {M * Hq, 1, Hq}))
    return "the ring is not packed slot-major";
  d.slot = h->slots.as<int32_t>();
  d.num_slots = p.batch;
  d.ring_q_pre = static_cast<uint16_t*>(in->ring_q.data);
  d.ring_o = static_cast<uint16_t*>(in->ring_o.data);
  d.ring_lse = static_cast<float*>(in->ring_lse.data);
  d.ready = h->ready32.as<int32_t>();
  d.epoch_a = h->epochs.as<int32_t>();
  d.epoch_b = h->epoch_b.as<int32_t>();
  if (o.strides[2] != 1 || lse.strides[1] != 1) return "o and lse need a contiguous last dimension";
  d.out = static_cast<uint16_t*>(o.data);
  d.out_row_stride = o.strides[0];
  d.out_head_stride = o.strides[1];
  d.lse = static_cast<float*>(lse.data);
  d.lse_row_stride = lse.strides[0];
  d.lse_head_stride = 1;
  if (diag) {
    if (!strides_are(diag->hit, {Hq, 1}) || !strides_are(diag->match_pos, {Hq, 1}))
      return "hit and match_pos are not packed";
    d.diag_hit = static_cast<int8_t*>(diag->hit.data);  // 0/1 bytes: the ABI's U8
    d.diag_match_pos = static_cast<int64_t*>(diag->match_pos.data);
    d.diag_d2 = h->d2.as<float>();
    d.diag_keys_read = h->keys32.as<int32_t>();
  }
  (void)Hkv;
  *dp = d;
  return {};
}

/*! Prompt entries of request b (Engine::prefill_entries, one request per call). */
Status prefill_request(macv_handle* h, const DecodeParams& kv, int b, int64_t first, int64_t count,
                       const uint16_t* q, const uint16_t* q_tilde, void* stream) {
  PrefillParams pp = PrefillParams::from_decode(kv);
  pp.page_table = kv.page_table + static_cast<int64_t>(b) * kv.max_pages_per_row;
  pp.batch = 1;
  pp.num_positions = static_cast<int>(count);
  const int32_t slot = b;
  pp.first_pos_host = &first;
  pp.slot_host = &slot;
  pp.q_post = q;
  pp.q_pre = q_tilde;
  return h->engine->prefill_entries(pp, stream);
}

}  // namespace

extern "C" {

int32_t macv_abi_version(void) { return MACV_ABI_VERSION; }

int32_t macv_query(macv_caps* c, char*, size_t) {
  std::snprintf(c->name, sizeof c->name, "mac-attention-cuda");
  std::snprintf(c->version, sizeof c->version, "%s", MAC_GIT_COMMIT);
  c->device = MACV_DEVICE_CUDA;
  for (int d : mac::kHeadDims) c->head_dims[c->num_head_dims++] = d;
  for (int g = 1; g <= kMaxGroup; ++g) c->gqa_ratios[g - 1] = g;
  c->num_gqa_ratios = kMaxGroup;
  c->kv_layouts = MACV_KV_NHD | MACV_KV_HND;  // through the engine's KV strides
  c->ring_layouts = MACV_RING_SLOT_MAJOR;
  c->sinks = 1;
  c->max_context = kMaxContext;
  c->out_dtype = MACV_BF16;
  c->ring_o_dtype = MACV_BF16;
  c->strided_io = 1;
  c->reports_keys_read = 1;
  c->writes_ring = 1;
  c->graph_capturable = 1;
  c->prefills = 1;
  c->full_attention = 1;
  c->checks = 1;
  c->policies = 0;  // declares no depth cap, refresh (§3.3) or gate (§3.5): those cases are N/A
  c->num_variants = 2;
  std::snprintf(c->variants[0], sizeof c->variants[0], "fused");
  std::snprintf(c->variants[1], sizeof c->variants[1], "side");
  return 0;
}

int32_t macv_create(const macv_params* p, void* stream, macv_handle** out, char* err, size_t n) {
  auto h = std::make_unique<macv_handle>();
  h->p = *p;
  EngineConfig ec;
  ec.max_batch = p->batch;
  ec.num_q_heads = p->num_q_heads;
  ec.num_kv_heads = p->num_kv_heads;
  ec.head_dim = p->head_dim;
  ec.max_context = static_cast<int>(p->max_context);
  ec.ring = static_cast<int>(p->ring);
  ec.k3_mode = p->variant == 1 ? K3Mode::kSideStream : K3Mode::kFused;
  ec.device = p->device_id;
  if (Status s = Engine::create(ec, &h->engine); !s.ok()) return fail(err, n, s, "Engine::create");
  if (Status s = Engine::create(ec, &h->full); !s.ok()) return fail(err, n, s, "Engine::create");
  const size_t B = static_cast<size_t>(p->batch), BH = B * static_cast<size_t>(p->num_q_heads);
  for (auto* b : {&h->kv_len, &h->ready32, &h->slots, &h->epochs, &h->epoch_b})
    if (Status s = b->allocate(4 * B); !s.ok()) return fail(err, n, s, "allocate");
  if (Status s = h->keys32.allocate(4 * BH); !s.ok()) return fail(err, n, s, "allocate");
  if (Status s = h->d2.allocate(4 * BH); !s.ok()) return fail(err, n, s, "allocate");
  std::vector<int32_t> slots(B);
  for (size_t i = 0; i < B; ++i) slots[i] = static_cast<int32_t>(i);
  if (Status s = copy_to_device(h->slots.data(), slots.data(), 4 * B, stream); !s.ok())
    return fail(err, n, s, "upload");
  if (Status s = device_memset(h->epochs.data(), 0, 4 * B, stream); !s.ok())
    return fail(err, n, s, "memset");
  if (Status s = stream_synchronize(stream); !s.ok()) return fail(err, n, s, "create");
  *out = h.release();
  return 0;
}

void macv_destroy(macv_handle* h) { delete h; }

int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, void* stream,
                  char* err, size_t n) {
  DecodeParams dp;
  if (std::string bad = decode_params(h, in, out->o, out->lse, out, &dp); !bad.empty())
    return fail(err, n, bad);
  const auto* pos = static_cast<const int64_t*>(in->position.data);
  const auto* ready = static_cast<const uint8_t*>(in->ready.data);
  mac::plugin_cuda::launch_prepare(pos, ready, h->kv_len.as<int32_t>(), h->ready32.as<int32_t>(),
                                   h->epoch_b.as<int32_t>(), h->p.batch, stream);
  if (Status s = h->engine->mac_step(dp, stream); !s.ok()) return fail(err, n, s, "mac_step");
  mac::plugin_cuda::launch_finish(
      pos, ready, h->keys32.as<int32_t>(), static_cast<int64_t*>(out->keys_read.data),
      out->keys_read.data ? out->keys_read.strides[0] : 0, static_cast<int64_t*>(in->ring_pos.data),
      h->p.batch, h->p.num_q_heads, h->p.ring, stream);
  return 0;
}

int32_t macv_full_attention(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out,
                            void* stream, char* err, size_t n) {
  DecodeParams dp;
  if (std::string bad = decode_params(h, in, out->o, out->lse, nullptr, &dp); !bad.empty())
    return fail(err, n, bad);
  mac::plugin_cuda::launch_prepare(static_cast<const int64_t*>(in->position.data),
                                   static_cast<const uint8_t*>(in->ready.data),
                                   h->kv_len.as<int32_t>(), h->ready32.as<int32_t>(),
                                   h->epoch_b.as<int32_t>(), h->p.batch, stream);
  if (Status s = h->full->full_attention(dp, stream); !s.ok())
    return fail(err, n, s, "full_attention");
  return 0;
}

int32_t macv_prefill(macv_handle* h, const macv_prefill_inputs* in, void* stream, char* err,
                     size_t n) {
  const macv_params& p = h->p;
  const int64_t B = p.batch, Hq = p.num_q_heads, M = p.ring, N = in->q.shape[1];
  std::vector<int64_t> first(static_cast<size_t>(B)), count(first.size());
  if (Status s = copy_to_host(first.data(), in->first_pos.data, 8 * first.size(), stream); !s.ok())
    return fail(err, n, s, "prefill");
  if (Status s = copy_to_host(count.data(), in->count.data, 8 * count.size(), stream); !s.ok())
    return fail(err, n, s, "prefill");
  std::vector<int64_t> ring_pos(static_cast<size_t>(B * M * Hq));
  if (Status s = copy_to_host(ring_pos.data(), in->ring_pos.data, 8 * ring_pos.size(), stream);
      !s.ok())
    return fail(err, n, s, "prefill");
  if (Status s = stream_synchronize(stream); !s.ok()) return fail(err, n, s, "prefill");
  macv_step_inputs kv{};
  kv.q = kv.q_tilde = in->q;  // strides only; the prefill's queries are passed per request
  const int64_t qs[3] = {Hq * p.head_dim, p.head_dim, 1};
  kv.q.strides = kv.q_tilde.strides = qs;
  kv.k_cache = in->k_cache;
  kv.v_cache = in->v_cache;
  kv.page_table = in->page_table;
  kv.ring_q = in->ring_q;
  kv.ring_o = in->ring_o;
  kv.ring_lse = in->ring_lse;
  kv.ring_pos = in->ring_pos;
  macv_tensor o{}, lse{};
  const int64_t os[3] = {qs[0], qs[1], 1}, ls[2] = {Hq, 1};
  o.strides = os;
  lse.strides = ls;
  DecodeParams dp;
  if (std::string bad = decode_params(h, &kv, o, lse, nullptr, &dp); !bad.empty())
    return fail(err, n, bad);
  const auto* q = static_cast<const uint16_t*>(in->q.data);
  const auto* qt = static_cast<const uint16_t*>(in->q_tilde.data);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t f = first[static_cast<size_t>(b)], c = count[static_cast<size_t>(b)];
    if (c == 0) continue;
    const int64_t off = b * N * Hq * p.head_dim;
    if (Status s = prefill_request(h, dp, static_cast<int>(b), f, c, q + off, qt + off, stream);
        !s.ok())
      return fail(err, n, s, "prefill_entries");
    for (int64_t pos = f; pos < f + c; ++pos)
      for (int64_t hq = 0; hq < Hq; ++hq)
        ring_pos[static_cast<size_t>((b * M + pos % M) * Hq + hq)] = pos;
  }
  if (Status s = copy_to_device(in->ring_pos.data, ring_pos.data(), 8 * ring_pos.size(), stream);
      !s.ok())
    return fail(err, n, s, "prefill");
  if (Status s = stream_synchronize(stream); !s.ok()) return fail(err, n, s, "prefill");
  return 0;
}

int32_t macv_check(macv_handle* h, void* stream, char* err, size_t n) {
  int flags = 0;
  if (Status s = h->engine->read_error_flags(&flags, true, stream); !s.ok())
    return fail(err, n, s, "read_error_flags");
  if (flags)
    return fail(err, n,
                "device error flags = " + std::to_string(flags) +
                    " (bit 0: kv_len out of range, bit 1: slot out of range, bit 2: page id)");
  return 0;
}

}  // extern "C"
