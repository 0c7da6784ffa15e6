// StepBuffers: the device arrays of a decode step in DecodeParams's dense layouts. Plain
// C++ over DeviceBuffer, so it builds (and reports kNoCuda) without CUDA too.
#include <sstream>
#include <utility>

#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {

Status StepBuffers::allocate(const StepShape& s) {
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"batch", s.batch},
               {"num_q_heads", s.num_q_heads},
               {"num_kv_heads", s.num_kv_heads},
               {"head_dim", s.head_dim},
               {"num_pages", s.num_pages},
               {"page_size", s.page_size},
               {"max_pages_per_row", s.max_pages_per_row},
               {"ring", s.ring},
               {"num_slots", s.num_slots}};
  for (const auto& z : sizes)
    if (z.value < 1) {
      std::ostringstream m;
      m << "StepBuffers: " << z.name << " = " << z.value << " must be >= 1";
      return {StatusCode::kInvalidArgument, m.str()};
    }
  // Built aside and moved in only when complete: a failed call leaves *this as it was.
  StepBuffers t;
  t.shape = s;
  const size_t D = static_cast<size_t>(s.head_dim),
               nh = static_cast<size_t>(s.batch) * s.num_q_heads;
  const size_t kv = static_cast<size_t>(s.num_pages) * s.page_size * s.num_kv_heads * D;
  const size_t rq = static_cast<size_t>(s.num_slots) * s.ring * s.num_q_heads;
  const size_t nd = s.diagnostics ? nh : 0;  // DeviceBuffer::allocate(0) leaves it empty
  const struct {
    DeviceBuffer* buf;
    size_t bytes;
  } plan[] = {{&t.k_cache, kv * 2},
              {&t.v_cache, kv * 2},
              {&t.page_table, static_cast<size_t>(s.batch) * s.max_pages_per_row * 4},
              {&t.kv_len, static_cast<size_t>(s.batch) * 4},
              {&t.slot, static_cast<size_t>(s.batch) * 4},
              {&t.q_post, nh * D * 2},
              {&t.q_pre, nh * D * 2},
              {&t.out, nh * D * 2},
              {&t.lse, nh * 4},
              {&t.ring_q_pre, rq * D * 2},
              {&t.ring_o, rq * D * 2},
              {&t.ring_lse, rq * 4},
              {&t.ready, static_cast<size_t>(s.num_slots) * 4},
              {&t.epoch_a, static_cast<size_t>(s.num_slots) * 4},
              {&t.epoch_b, static_cast<size_t>(s.num_slots) * 4},
              {&t.diag_hit, nd},
              {&t.diag_match_pos, nd * 8},
              {&t.diag_d2, nd * 4},
              {&t.diag_keys_read, nd * 4}};
  for (const auto& a : plan) {
    const Status st = a.buf->allocate(a.bytes);
    if (!st.ok()) return st;
  }
  *this = std::move(t);
  return Status::Ok();
}

DecodeParams StepBuffers::params() const {
  DecodeParams p;
  p.batch = shape.batch;
  p.q_post = q_post.as<uint16_t>();
  p.q_pre = q_pre.as<uint16_t>();
  p.k_cache = k_cache.as<uint16_t>();
  p.v_cache = v_cache.as<uint16_t>();
  p.num_pages = shape.num_pages;
  p.page_size = shape.page_size;
  p.page_table = page_table.as<int32_t>();
  p.max_pages_per_row = shape.max_pages_per_row;
  p.kv_len = kv_len.as<int32_t>();
  p.ring = shape.ring;
  p.slot = slot.as<int32_t>();
  p.num_slots = shape.num_slots;
  p.ring_q_pre = ring_q_pre.as<uint16_t>();
  p.ring_o = ring_o.as<uint16_t>();
  p.ring_lse = ring_lse.as<float>();
  p.ready = ready.as<int32_t>();
  p.epoch_a = epoch_a.as<int32_t>();
  p.epoch_b = epoch_b.as<int32_t>();
  p.out = out.as<uint16_t>();
  p.lse = lse.as<float>();
  p.diag_hit = diag_hit.as<int8_t>();
  p.diag_match_pos = diag_match_pos.as<int64_t>();
  p.diag_d2 = diag_d2.as<float>();
  p.diag_keys_read = diag_keys_read.as<int32_t>();
  return p;
}

}  // namespace mac::cuda
