// Prefill ring entries (DESIGN §3 "Prefill"): each (request, position) a pseudo-row whose
// band state is written to the ring, max_batch pseudo-rows per launch of the step sequence.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"

namespace mac::cuda {

Status Engine::prefill_entries(const PrefillParams& pp, void* stream) {
  const EngineConfig& c = impl_->cfg;
  DecodeParams p = pp.kv;
  if (pp.batch < 1) return invalid(cat("prefill batch = ", pp.batch, " must be ≥ 1"));
  if (pp.num_positions < 0 || pp.num_positions > c.ring)
    return invalid(cat("num_positions = ", pp.num_positions, " must be in [0, M = ", c.ring, "]"));
  if (pp.num_positions == 0) return Status::Ok();
  if (!pp.first_pos_host || !pp.slot_host)
    return invalid("prefill first_pos_host/slot_host is null");
  if (!pp.q_pre || !pp.q_post) return invalid("prefill q_pre/q_post is null");
  if (!p.ring_q_pre || !p.ring_o || !p.ring_lse) return invalid("prefill: a ring pointer is null");
  if (p.num_slots < 1) return invalid(cat("num_slots = ", p.num_slots, " must be ≥ 1"));
  if (p.ring != c.ring)
    return invalid(cat("ring (M) = ", p.ring, " differs from config.ring = ", c.ring));
  for (int i = 0; i < pp.batch; ++i) {
    const int64_t last = pp.first_pos_host[i] + pp.num_positions;  // kv_len of the last position
    if (pp.first_pos_host[i] < 0 || last > c.max_context)
      return {StatusCode::kContextTooLong,
              cat("prefill request ", i, ": positions [", pp.first_pos_host[i], ", ", last,
                  ") exceed max_context = ", c.max_context)};
    if (pp.slot_host[i] < 0 || pp.slot_host[i] >= p.num_slots)
      return invalid(cat("prefill request ", i, ": slot = ", pp.slot_host[i], " out of [0, ",
                         p.num_slots, ")"));
  }
  // Each (request, position) is a pseudo-row with its own query and kv_len = p + 1; its
  // band state over [Fe(E(p)), E(p)) is the entry. Processed max_batch pseudo-rows at a time.
  const int64_t total = int64_t{pp.batch} * pp.num_positions;
  const int64_t rs = int64_t{c.num_q_heads} * c.head_dim;
  std::vector<int32_t> h_pt, h_len, h_slot;
  const cudaStream_t s = as_stream(stream);
  for (int64_t r0 = 0; r0 < total; r0 += c.max_batch) {
    const int n = static_cast<int>(std::min<int64_t>(c.max_batch, total - r0));
    h_pt.assign(3 * n, 0);
    for (int j = 0; j < n; ++j) {
      const int64_t pr = r0 + j, req = pr / pp.num_positions,
                    pos = pp.first_pos_host[req] + pr % pp.num_positions;
      h_pt[j] = static_cast<int32_t>(req);
      h_pt[n + j] = static_cast<int32_t>(pos + 1);
      h_pt[2 * n + j] = pp.slot_host[req];
    }
    MAC_CUDA_TRY(
        cudaMemcpyAsync(impl_->pf_pt, h_pt.data(), sizeof(int32_t) * n, cudaMemcpyHostToDevice, s));
    MAC_CUDA_TRY(cudaMemcpyAsync(impl_->pf_len, h_pt.data() + n, sizeof(int32_t) * n,
                                 cudaMemcpyHostToDevice, s));
    MAC_CUDA_TRY(cudaMemcpyAsync(impl_->pf_slot, h_pt.data() + 2 * n, sizeof(int32_t) * n,
                                 cudaMemcpyHostToDevice, s));
    DecodeParams q = p;
    q.batch = n;
    q.q_post = pp.q_post + r0 * rs;
    q.q_pre = pp.q_pre + r0 * rs;
    q.q_row_stride = rs;
    q.q_head_stride = c.head_dim;
    q.kv_len = impl_->pf_len;
    q.slot = impl_->pf_slot;
    q.out = nullptr;
    q.lse = nullptr;
    KParams kp = impl_->base(q, detail::kModePrefill);
    kp.row_pt = impl_->pf_pt;
    kp.out = nullptr;
    kp.lse = nullptr;
    kp.diag_hit = nullptr;
    kp.diag_match_pos = nullptr;
    kp.diag_d2 = nullptr;
    kp.diag_keys_read = nullptr;
    kp.k3_in_combine = 1;
    MAC_STATUS_TRY(impl_->launch(kp, detail::kModePrefill, s));
    MAC_CUDA_TRY(cudaStreamSynchronize(s));  // host arrays are reused by the next chunk
  }
  return Status::Ok();
}

}  // namespace mac::cuda
