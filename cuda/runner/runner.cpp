// GPU case runner: packing, upload, steps and read-back on the public mac_cuda API
// (runner.hpp documents the layouts).
#include "mac/cuda/runner.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <utility>

#if MAC_CUDA_ENABLED
#include <cuda_runtime.h>
#endif

namespace mac::cuda::runner {
namespace {

#define MAC_RUNNER_TRY(expr) \
  do {                       \
    Status s_ = (expr);      \
    if (!s_.ok()) return s_; \
  } while (0)

Status invalid(const std::string& what) {
  return {StatusCode::kInvalidArgument, "CaseRunner: " + what};
}

template <typename T>
Status upload(DeviceBuffer& dst, const std::vector<T>& src, void* stream) {
  return copy_to_device(dst.data(), src.data(), src.size() * sizeof(T), stream);
}

}  // namespace

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

size_t kv_offset(const std::vector<int32_t>& page_table, int max_pages_per_row, int page_size,
                 int num_kv_heads, int head_dim, int row, int64_t t) {
  const int page =
      page_table[static_cast<size_t>(row) * max_pages_per_row + static_cast<size_t>(t / page_size)];
  return (static_cast<size_t>(page) * page_size + static_cast<size_t>(t % page_size)) *
         num_kv_heads * head_dim;
}

size_t ring_entry(int slot, int64_t pos, int ring, int num_q_heads) {
  return (static_cast<size_t>(slot) * ring + static_cast<size_t>(pos % ring)) * num_q_heads;
}

std::vector<int32_t> contiguous_page_table(int rows, int pages_per_row, int pages_needed,
                                           bool packed) {
  std::vector<int32_t> pt(static_cast<size_t>(rows) * pages_per_row);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < pages_per_row; ++j)
      pt[static_cast<size_t>(i) * pages_per_row + j] =
          packed && j < pages_needed ? i * pages_needed + j : i * pages_per_row + j;
  return pt;
}

Status upload_slots_and_readiness(StepBuffers& b, const std::vector<int32_t>& slots,
                                  const std::vector<int32_t>& ready,
                                  const std::vector<int32_t>& epoch_a,
                                  const std::vector<int32_t>& epoch_b, void* stream) {
  MAC_RUNNER_TRY(upload(b.ready, ready, stream));
  MAC_RUNNER_TRY(upload(b.epoch_a, epoch_a, stream));
  MAC_RUNNER_TRY(upload(b.epoch_b, epoch_b, stream));
  return upload(b.slot, slots, stream);
}

// ---------------------------------------------------------------------------------------
// RingPositionCopy
// ---------------------------------------------------------------------------------------

Status RingPositionCopy::allocate(int rows, int num_q_heads, int head_dim) {
  hq_ = num_q_heads;
  d_ = head_dim;
  const size_t n = static_cast<size_t>(rows) * num_q_heads;
  MAC_RUNNER_TRY(q_.allocate(n * head_dim * 2));
  MAC_RUNNER_TRY(o_.allocate(n * head_dim * 2));
  return l_.allocate(n * 4);
}

Status RingPositionCopy::save(const DecodeParams& p, int first_slot, int rows, int64_t pos,
                              void* stream) {
  return copy(p, first_slot, rows, pos, false, stream);
}

Status RingPositionCopy::restore(const DecodeParams& p, int first_slot, int rows, int64_t pos,
                                 void* stream) {
  return copy(p, first_slot, rows, pos, true, stream);
}

Status RingPositionCopy::copy(const DecodeParams& p, int first_slot, int rows, int64_t pos,
                              bool to_ring, void* stream) {
#if MAC_CUDA_ENABLED
  // One strided copy per array: `rows` blocks of Hq entries, one ring (M·Hq entries) apart.
  const size_t e = ring_entry(first_slot, pos, p.ring, hq_), ring_pitch = size_t{1} * p.ring * hq_;
  const size_t row_q = static_cast<size_t>(hq_) * d_ * 2, row_l = static_cast<size_t>(hq_) * 4;
  struct Array {
    void* ring;
    void* copy;
    size_t row, pitch;
  } arrays[] = {{p.ring_q_pre + e * d_, q_.data(), row_q, ring_pitch * d_ * 2},
                {p.ring_o + e * d_, o_.data(), row_q, ring_pitch * d_ * 2},
                {p.ring_lse + e, l_.data(), row_l, ring_pitch * 4}};
  for (const Array& a : arrays) {
    const cudaError_t err =
        to_ring ? cudaMemcpy2DAsync(a.ring, a.pitch, a.copy, a.row, a.row, rows,
                                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream))
                : cudaMemcpy2DAsync(a.copy, a.row, a.ring, a.pitch, a.row, rows,
                                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess)
      return {StatusCode::kCudaError,
              std::string("RingPositionCopy: cudaMemcpy2DAsync: ") + cudaGetErrorString(err)};
  }
  return Status::Ok();
#else
  (void)p, (void)first_slot, (void)rows, (void)pos, (void)to_ring, (void)stream;
  return {StatusCode::kNoCuda, "RingPositionCopy: built without CUDA"};
#endif
}

// ---------------------------------------------------------------------------------------
// CaseRunner
// ---------------------------------------------------------------------------------------

Status CaseRunner::create(const CaseLayout& layout, const EngineConfig& mac,
                          const EngineConfig& full, std::unique_ptr<CaseRunner>* out) {
  const int n = static_cast<int>(layout.requests.size());
  if (n < 1) return invalid("no requests");
  if (layout.num_q_heads < 1 || layout.num_kv_heads < 1 || layout.head_dim < 1 ||
      layout.page_size < 1 || layout.ring < 1 || layout.num_slots < 1) {
    std::ostringstream m;
    m << "sizes Hq = " << layout.num_q_heads << ", Hkv = " << layout.num_kv_heads
      << ", D = " << layout.head_dim << ", page_size = " << layout.page_size
      << ", ring = " << layout.ring << ", num_slots = " << layout.num_slots << " must all be >= 1";
    return invalid(m.str());
  }
  if (static_cast<int>(layout.slots.size()) != n)
    return invalid("slots has " + std::to_string(layout.slots.size()) + " entries for " +
                   std::to_string(n) + " requests");
  for (const auto* a : {&layout.ready, &layout.epoch_a, &layout.epoch_b})
    if (static_cast<int>(a->size()) != layout.num_slots)
      return invalid("a readiness array has " + std::to_string(a->size()) + " entries for " +
                     std::to_string(layout.num_slots) + " slots");
  for (int i = 0; i < n; ++i) {
    const auto& r = layout.requests[static_cast<size_t>(i)];
    if (r.prompt < 0 || r.prompt > r.tokens || !r.k || !r.v || !r.q_pre || !r.q_post)
      return invalid("request " + std::to_string(i) + ": prompt " + std::to_string(r.prompt) +
                     " of " + std::to_string(r.tokens) + " tokens, or a null stream");
    const int s = layout.slots[static_cast<size_t>(i)];
    if (s < 0 || s >= layout.num_slots)
      return invalid("slot " + std::to_string(s) + " of request " + std::to_string(i) +
                     " outside [0, " + std::to_string(layout.num_slots) + ")");
  }
  std::unique_ptr<CaseRunner> r(new CaseRunner());
  r->c_ = layout;
  MAC_RUNNER_TRY(r->pack());
  MAC_RUNNER_TRY(Engine::create(mac, &r->engine_));
  MAC_RUNNER_TRY(Engine::create(full, &r->engine_full_));
  *out = std::move(r);
  return Status::Ok();
}

CaseRunner::~CaseRunner() {
  engine_.reset();
  engine_full_.reset();
  if (stream_) stream_destroy(stream_);
}

size_t CaseRunner::kv_index(int row, int64_t t) const {
  return kv_offset(page_table_, max_pages_, c_.page_size, c_.num_kv_heads, c_.head_dim, row, t);
}

Status CaseRunner::pack() {
  const int n = batch(), ps = c_.page_size, hkv = c_.num_kv_heads, d = c_.head_dim;
  const int hq = c_.num_q_heads;
  // Pages of all rows in one pool, permuted, handed out row after row; one spare page.
  int pages = 0;
  max_pages_ = 0;
  for (const auto& r : c_.requests) {
    const int np = static_cast<int>((r.tokens + ps - 1) / ps);
    max_pages_ = std::max(max_pages_, np);
    pages += np;
  }
  num_pages_ = pages + 1;
  std::vector<int32_t> perm(static_cast<size_t>(pages));
  std::iota(perm.begin(), perm.end(), 0);
  if (c_.shuffle_pages) c_.shuffle_pages(perm);
  page_table_.assign(static_cast<size_t>(n) * max_pages_, static_cast<int32_t>(num_pages_ - 1));
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    const int np = static_cast<int>((c_.requests[static_cast<size_t>(i)].tokens + ps - 1) / ps);
    for (int j = 0; j < np; ++j) page_table_[static_cast<size_t>(i) * max_pages_ + j] = perm[k++];
  }
  // The prompt's keys and values; NaN poison where no token was written.
  const size_t kv_elems = static_cast<size_t>(num_pages_) * ps * hkv * d;
  const size_t tok = static_cast<size_t>(hkv) * d;
  k_host_.assign(kv_elems, 0x7fc0);
  v_host_.assign(kv_elems, 0x7fc0);
  for (int i = 0; i < n; ++i) {
    const auto& r = c_.requests[static_cast<size_t>(i)];
    for (int64_t t = 0; t < r.prompt; ++t) {
      const size_t dst = kv_index(i, t), src = static_cast<size_t>(t) * tok;
      for (size_t e = 0; e < tok; ++e) {
        k_host_[dst + e] = bf16_bits(r.k[src + e]);
        v_host_[dst + e] = bf16_bits(r.v[src + e]);
      }
    }
  }
  StepShape sh;
  sh.batch = n;
  sh.num_q_heads = hq;
  sh.num_kv_heads = hkv;
  sh.head_dim = d;
  sh.num_pages = num_pages_;
  sh.page_size = ps;
  sh.max_pages_per_row = max_pages_;
  sh.ring = c_.ring;
  sh.num_slots = c_.num_slots;
  MAC_RUNNER_TRY(b_.allocate(sh));
  MAC_RUNNER_TRY(stream_create(&stream_));
  MAC_RUNNER_TRY(upload(b_.k_cache, k_host_, stream_));
  MAC_RUNNER_TRY(upload(b_.v_cache, v_host_, stream_));
  MAC_RUNNER_TRY(upload(b_.page_table, page_table_, stream_));
  const size_t nh = static_cast<size_t>(n) * hq;
  MAC_RUNNER_TRY(out_full_.allocate(nh * d * 2));
  MAC_RUNNER_TRY(lse_full_.allocate(nh * 4));
  // Empty rings.
  const size_t rq = static_cast<size_t>(c_.num_slots) * c_.ring * hq;
  const std::vector<float> ninf(rq, -std::numeric_limits<float>::infinity());
  MAC_RUNNER_TRY(upload(b_.ring_lse, ninf, stream_));
  MAC_RUNNER_TRY(device_memset(b_.ring_q_pre.data(), 0, rq * d * 2, stream_));
  MAC_RUNNER_TRY(device_memset(b_.ring_o.data(), 0, rq * d * 2, stream_));
  MAC_RUNNER_TRY(
      upload_slots_and_readiness(b_, c_.slots, c_.ready, c_.epoch_a, c_.epoch_b, stream_));
  return stream_synchronize(stream_);  // the host vectors above go out of scope
}

DecodeParams CaseRunner::params() const {
  DecodeParams p = b_.params();
  p.softmax_scale = c_.softmax_scale;
  p.tau = c_.tau;
  p.tail = c_.tail;
  p.sinks = c_.sinks;
  p.gen_min = c_.gen_min;
  return p;
}

Status CaseRunner::prefill(int first_row, int rows, int num_positions,
                           const std::vector<int64_t>& first_pos) {
  if (first_row < 0 || rows < 1 || first_row + rows > batch() ||
      static_cast<int>(first_pos.size()) != rows || num_positions < 1)
    return invalid("prefill of rows [" + std::to_string(first_row) + ", " +
                   std::to_string(first_row + rows) + ") with " + std::to_string(first_pos.size()) +
                   " first positions, " + std::to_string(num_positions) + " positions, of " +
                   std::to_string(batch()) + " rows");
  const size_t hd = static_cast<size_t>(c_.num_q_heads) * c_.head_dim;
  std::vector<uint16_t> qpre(static_cast<size_t>(rows) * num_positions * hd), qpost(qpre.size());
  for (int j = 0; j < rows; ++j) {
    const auto& r = c_.requests[static_cast<size_t>(first_row + j)];
    const size_t src0 = static_cast<size_t>(first_pos[static_cast<size_t>(j)]) * hd;
    const size_t dst0 = static_cast<size_t>(j) * num_positions * hd;
    for (size_t e = 0; e < static_cast<size_t>(num_positions) * hd; ++e) {
      qpre[dst0 + e] = bf16_bits(r.q_pre[src0 + e]);
      qpost[dst0 + e] = bf16_bits(r.q_post[src0 + e]);
    }
  }
  DeviceBuffer dq, dp;
  MAC_RUNNER_TRY(dq.allocate(qpre.size() * 2));
  MAC_RUNNER_TRY(dp.allocate(qpost.size() * 2));
  MAC_RUNNER_TRY(upload(dq, qpre, stream_));
  MAC_RUNNER_TRY(upload(dp, qpost, stream_));
  PrefillParams pp = PrefillParams::from_decode(params());
  pp.page_table = b_.page_table.as<int32_t>() + static_cast<size_t>(first_row) * max_pages_;
  pp.batch = rows;
  pp.num_positions = num_positions;
  pp.first_pos_host = first_pos.data();
  pp.slot_host = c_.slots.data() + first_row;
  pp.q_pre = dq.as<uint16_t>();
  pp.q_post = dp.as<uint16_t>();
  MAC_RUNNER_TRY(engine_->prefill_entries(pp, stream_));
  return stream_synchronize(stream_);  // dq, dp are freed on return
}

Status CaseRunner::upload_step(const std::vector<int64_t>& pos) {
  const int n = batch();
  if (static_cast<int>(pos.size()) != n)
    return invalid("upload_step with " + std::to_string(pos.size()) + " positions for " +
                   std::to_string(n) + " rows");
  const size_t hd = static_cast<size_t>(c_.num_q_heads) * c_.head_dim;
  const size_t tok = static_cast<size_t>(c_.num_kv_heads) * c_.head_dim;
  q_post_host_.resize(static_cast<size_t>(n) * hd);
  q_pre_host_.resize(q_post_host_.size());
  len_host_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto& r = c_.requests[static_cast<size_t>(i)];
    const int64_t m = pos[static_cast<size_t>(i)];
    if (m < 0 || m >= r.tokens)
      return invalid("position " + std::to_string(m) + " of row " + std::to_string(i) +
                     " outside its " + std::to_string(r.tokens) + " tokens");
    // The token's K/V into its page (host mirror, then the same bytes to the device).
    const size_t dst = kv_index(i, m), src = static_cast<size_t>(m) * tok;
    for (size_t e = 0; e < tok; ++e) {
      k_host_[dst + e] = bf16_bits(r.k[src + e]);
      v_host_[dst + e] = bf16_bits(r.v[src + e]);
    }
    MAC_RUNNER_TRY(
        copy_to_device(b_.k_cache.as<uint16_t>() + dst, k_host_.data() + dst, tok * 2, stream_));
    MAC_RUNNER_TRY(
        copy_to_device(b_.v_cache.as<uint16_t>() + dst, v_host_.data() + dst, tok * 2, stream_));
    for (size_t e = 0; e < hd; ++e) {
      q_post_host_[static_cast<size_t>(i) * hd + e] =
          bf16_bits(r.q_post[static_cast<size_t>(m) * hd + e]);
      q_pre_host_[static_cast<size_t>(i) * hd + e] =
          bf16_bits(r.q_pre[static_cast<size_t>(m) * hd + e]);
    }
    len_host_[static_cast<size_t>(i)] = static_cast<int32_t>(m + 1);
  }
  MAC_RUNNER_TRY(upload(b_.q_post, q_post_host_, stream_));
  MAC_RUNNER_TRY(upload(b_.q_pre, q_pre_host_, stream_));
  MAC_RUNNER_TRY(upload(b_.kv_len, len_host_, stream_));
  return stream_synchronize(stream_);
}

Status CaseRunner::mac_step(bool graph) {
  if (!graph) return engine_->mac_step(params(), stream_);
  if (!captured_) {
    MAC_RUNNER_TRY(engine_->capture(StepKind::kMac, params(), stream_));
    captured_ = true;
  }
  return engine_->replay(stream_);
}

Status CaseRunner::full_attention() {
  DecodeParams p = params();
  p.out = out_full_.as<uint16_t>();
  p.lse = lse_full_.as<float>();
  p.diag_hit = nullptr;
  p.diag_match_pos = nullptr;
  p.diag_d2 = nullptr;
  p.diag_keys_read = nullptr;
  return engine_full_->full_attention(p, stream_);
}

Status CaseRunner::read_step(StepReadback* r) {
  const size_t nh = static_cast<size_t>(batch()) * c_.num_q_heads, nd = nh * c_.head_dim;
  r->out.resize(nd);
  r->out_full.resize(nd);
  r->lse.resize(nh);
  r->lse_full.resize(nh);
  r->d2.resize(nh);
  r->hit.resize(nh);
  r->match_pos.resize(nh);
  r->keys_read.resize(nh);
  MAC_RUNNER_TRY(copy_to_host(r->out.data(), b_.out.data(), nd * 2, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->out_full.data(), out_full_.data(), nd * 2, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->lse.data(), b_.lse.data(), nh * 4, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->lse_full.data(), lse_full_.data(), nh * 4, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->d2.data(), b_.diag_d2.data(), nh * 4, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->hit.data(), b_.diag_hit.data(), nh, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->match_pos.data(), b_.diag_match_pos.data(), nh * 8, stream_));
  MAC_RUNNER_TRY(copy_to_host(r->keys_read.data(), b_.diag_keys_read.data(), nh * 4, stream_));
  return stream_synchronize(stream_);
}

Status CaseRunner::read_ring_slot(int row, int64_t pos, RingSlot* s) {
  return read_ring_positions(row, pos, 1, s);
}

Status CaseRunner::read_ring(int row, RingSlot* s) {
  return read_ring_positions(row, 0, c_.ring, s);
}

Status CaseRunner::read_ring_positions(int row, int64_t pos, int count, RingSlot* s) {
  if (row < 0 || row >= batch())
    return invalid("ring read of row " + std::to_string(row) + " of " + std::to_string(batch()));
  const int hq = c_.num_q_heads;
  const size_t e = ring_entry(c_.slots[static_cast<size_t>(row)], pos, c_.ring, hq);
  const size_t n = static_cast<size_t>(count) * hq, nd = n * c_.head_dim;
  s->q_pre.resize(nd);
  s->o.resize(nd);
  s->lse.resize(n);
  MAC_RUNNER_TRY(copy_to_host(s->q_pre.data(), b_.ring_q_pre.as<uint16_t>() + e * c_.head_dim,
                              nd * 2, stream_));
  MAC_RUNNER_TRY(
      copy_to_host(s->o.data(), b_.ring_o.as<uint16_t>() + e * c_.head_dim, nd * 2, stream_));
  MAC_RUNNER_TRY(copy_to_host(s->lse.data(), b_.ring_lse.as<float>() + e, n * 4, stream_));
  return stream_synchronize(stream_);
}

}  // namespace mac::cuda::runner
