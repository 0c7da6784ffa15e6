// Host-side checks of a step's DecodeParams and a prefill's PrefillParams against the engine
// config, and the kernel parameter block (KParams) filled from them: the one place API fields
// become kernel fields.
#include <algorithm>
#include <cmath>
#include <string>

#include "engine_impl.hpp"
#include "strides.hpp"

namespace mac::cuda {

namespace {

/*! \brief The scalars a step and a prefill share (DecodeParams, PrefillParams). */
template <class P>
Status check_scalars(const P& p) {
  if (!(std::isfinite(p.softmax_scale) && p.softmax_scale > 0))
    return invalid(cat("softmax_scale = ", p.softmax_scale, " must be finite and > 0"));
  if (p.tail < 0) return invalid(cat("tail (r) = ", p.tail, " must be ≥ 0"));
  if (p.sinks < 0) return invalid(cat("sinks (F) = ", p.sinks, " must be ≥ 0"));
  return Status::Ok();
}

/*! \brief The ring caches of a MAC step or a prefill: M as configured, slots, pointers. */
template <class P>
Status check_rings(const P& p, const EngineConfig& c) {
  if (p.ring != c.ring)
    return invalid(cat("ring (M) = ", p.ring, " differs from config.ring = ", c.ring));
  if (p.num_slots < 1) return invalid(cat("num_slots = ", p.num_slots, " must be ≥ 1"));
  if (!p.ring_q_pre || !p.ring_o || !p.ring_lse) return invalid("a ring pointer is null");
  return Status::Ok();
}

}  // namespace

Status Engine::validate(const DecodeParams& p, StepKind kind) const {
  const EngineConfig& c = impl_->cfg;
  const int D = c.head_dim;
  if (p.batch < 1 || p.batch > c.max_batch)
    return invalid(cat("batch = ", p.batch, " must be in [1, max_batch = ", c.max_batch, "]"));
  if (!p.q_post) return invalid("q_post is null");
  if (!p.kv_len) return invalid("kv_len is null");
  if (!p.out) return invalid("out is null");
  const int Hq = c.num_q_heads;
  for (const std::string& e :
       {detail::check_paged_kv(p, c.num_kv_heads, D),
        detail::check_strides("q", p.q_row_stride, p.q_head_stride, p.batch, Hq, D, 8, true),
        detail::check_strides("out", p.out_row_stride, p.out_head_stride, p.batch, Hq, D, 1, true),
        detail::check_strides("lse", p.lse_row_stride, p.lse_head_stride, p.batch, Hq, 1, 1,
                              p.lse != nullptr)})
    if (!e.empty()) return invalid(e);
  MAC_STATUS_TRY(check_scalars(p));
  if (kind == StepKind::kMac) {
    if (!p.q_pre) return invalid("q_pre is null");
    if (!(std::isfinite(p.tau) && p.tau < 1))
      return invalid(cat("tau = ", p.tau, " must be finite and < 1"));
    if (p.gen_min < 0) return invalid(cat("gen_min = ", p.gen_min, " must be ≥ 0"));
    if (!p.slot) return invalid("slot is null");
    MAC_STATUS_TRY(check_rings(p, c));
    if (!p.ready || !p.epoch_a || !p.epoch_b) return invalid("ready/epoch_a/epoch_b is null");
  }
  return Status::Ok();
}

Status Engine::Impl::validate(const PrefillParams& p) const {
  const EngineConfig& c = cfg;
  if (p.batch < 1) return invalid(cat("prefill batch = ", p.batch, " must be ≥ 1"));
  if (p.num_positions < 0 || p.num_positions > c.ring)
    return invalid(cat("num_positions = ", p.num_positions, " must be in [0, M = ", c.ring, "]"));
  if (p.num_positions == 0) return Status::Ok();  // nothing is read
  if (!p.first_pos_host || !p.slot_host) return invalid("first_pos_host/slot_host is null");
  if (!p.q_pre || !p.q_post) return invalid("q_pre/q_post is null");
  for (const std::string& e :
       {detail::check_paged_kv(p, c.num_kv_heads, c.head_dim),
        detail::check_prefill_q(p.q_request_stride, p.q_position_stride, p.q_head_stride, p.batch,
                                p.num_positions, c.num_q_heads, c.head_dim)})
    if (!e.empty()) return invalid(e);
  MAC_STATUS_TRY(check_scalars(p));
  MAC_STATUS_TRY(check_rings(p, c));
  const int64_t keys = int64_t{p.max_pages_per_row} * p.page_size;
  for (int i = 0; i < p.batch; ++i) {
    const int64_t last = p.first_pos_host[i] + p.num_positions;  // kv_len of the last position
    if (p.first_pos_host[i] < 0 || last > c.max_context)
      return {StatusCode::kContextTooLong,
              cat("prefill request ", i, ": positions [", p.first_pos_host[i], ", ", last,
                  ") exceed max_context = ", c.max_context)};
    if (last > keys)
      return invalid(cat("prefill request ", i, ": positions up to ", last - 1,
                         " beyond its page-table row (max_pages_per_row = ", p.max_pages_per_row,
                         " of page_size = ", p.page_size, ")"));
    if (p.slot_host[i] < 0 || p.slot_host[i] >= p.num_slots)
      return invalid(cat("prefill request ", i, ": slot = ", p.slot_host[i], " out of [0, ",
                         p.num_slots, ")"));
  }
  return Status::Ok();
}

KParams Engine::Impl::base(const DecodeParams& p, int mode) const {
  KParams k{};
  const int D = cfg.head_dim;
  k.N = p.batch;
  k.Hq = cfg.num_q_heads;
  k.Hkv = cfg.num_kv_heads;
  k.G = G;
  k.D = D;
  k.mode = mode;
  k.q_post = p.q_post;
  k.q_pre = p.q_pre;
  const detail::HeadStrides qs = detail::resolve_strides(p.q_row_stride, p.q_head_stride, k.Hq, D);
  k.q_row_stride = qs.row;
  k.q_head_stride = qs.head;
  k.k_cache = p.k_cache;
  k.v_cache = p.v_cache;
  k.token_stride = p.kv_token_stride ? p.kv_token_stride : int64_t{k.Hkv} * D;
  k.head_stride = p.kv_head_stride ? p.kv_head_stride : D;
  k.page_stride = p.kv_page_stride ? p.kv_page_stride : k.token_stride * p.page_size;
  k.page_size = p.page_size;
  k.page_shift = detail::is_pow2(p.page_size) ? detail::log2_exact(p.page_size) : -1;
  k.num_pages = p.num_pages;
  k.page_table = p.page_table;
  k.max_pages = p.max_pages_per_row;
  k.row_pt = nullptr;
  k.kv_len = p.kv_len;
  k.max_context = cfg.max_context;
  k.scale_log2 = static_cast<float>(static_cast<double>(p.softmax_scale) * mac::kLog2e);
  k.thr = mac::match_threshold(D, p.tau);
  k.M = cfg.ring;
  k.r = p.tail;
  k.F = p.sinks;
  k.gen_min = p.gen_min;
  k.slot = p.slot;
  k.R = p.num_slots;
  k.ring_q = p.ring_q_pre;
  k.ring_o = p.ring_o;
  k.ring_lse = p.ring_lse;
  k.ready = p.ready;
  k.epoch_a = p.epoch_a;
  k.epoch_b = p.epoch_b;
  k.out = p.out;
  k.lse = p.lse;
  const detail::HeadStrides os =
      detail::resolve_strides(p.out_row_stride, p.out_head_stride, k.Hq, D);
  const detail::HeadStrides ls =
      detail::resolve_strides(p.lse_row_stride, p.lse_head_stride, k.Hq, 1);
  k.out_row_stride = os.row;
  k.out_head_stride = os.head;
  k.lse_row_stride = ls.row;
  k.lse_head_stride = ls.head;
  k.diag_hit = p.diag_hit;
  k.diag_match_pos = p.diag_match_pos;
  k.diag_d2 = p.diag_d2;
  k.diag_keys_read = p.diag_keys_read;
  k.chunk = chunk;
  k.warps_total = grid * detail::kAmendWarps;
  k.k3_in_combine = cfg.k3_mode == K3Mode::kFused ? 1 : 0;
  k.self_schedule = table_bytes > 0 ? 1 : 0;
  k.kv_evict_first = kv_evict_first;
  k.parts_discard = parts_discard;
  k.parts_evict_last = parts_evict_last;
  k.plans = plans;
  k.snap_o = snap_o;
  k.snap_lse2 = snap_lse2;
  k.rows = rows;
  k.groups = groups;
  k.group_off = group_off;
  k.item_group = item_group;
  k.work = work;
  k.part_o = part_o;
  k.part_lse2 = part_lse2;
  k.max_items = max_items;
  k.err = err;
  // K1: enough blocks to cover the SMs twice when N·Hq is small (cost stays flat in context).
  const int nh = k.N * k.Hq;
  k.k1_splits = std::max(1, std::min(detail::kMaxK1Splits, (2 * sms + nh - 1) / nh));
  k.k1_splits = std::min(k.k1_splits, std::max(1, cfg.ring / 32));
  if (mode == detail::kModeFull) {
    k.slot = nullptr;
    k.diag_hit = nullptr;  // diagnostics are MAC's; full attention leaves them alone
    k.diag_match_pos = nullptr;
    k.diag_d2 = nullptr;
    k.diag_keys_read = nullptr;
  }
  return k;
}

}  // namespace mac::cuda
