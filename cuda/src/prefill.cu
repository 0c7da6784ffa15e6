// Prefill ring entries (docs/semantics.md §3 "Prefill"): each (request, position) a pseudo-row
// whose band state is written to the ring, max_batch pseudo-rows per launch of the step sequence;
// and the gather of those rows' queries where the caller's strides do not space them evenly.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"
#include "strides.hpp"

namespace mac::cuda {

namespace detail {
namespace {

/*! \brief Copies the queries of pseudo-rows r0 … r0 + gridDim.x − 1 (row r: request r / P,
 *  position r % P, at the caller's strides rs, ps, hs) into packed rows [n, Hq, D] at `dst`:
 *  one block per (row, head), 16 bytes per thread (the strides are multiples of 8). */
__global__ void gather_prefill_q_kernel(const uint16_t* src, uint16_t* dst, int64_t r0, int P,
                                        int D, int64_t rs, int64_t ps, int64_t hs) {
  const int64_t j = blockIdx.x, r = r0 + j;
  const int h = blockIdx.y, Hq = gridDim.y;
  const uint16_t* s = src + (r / P) * rs + (r % P) * ps + h * hs;
  uint16_t* d = dst + (j * Hq + h) * D;
  for (int e = 8 * threadIdx.x; e < D; e += 8 * blockDim.x)
    *reinterpret_cast<uint4*>(d + e) = *reinterpret_cast<const uint4*>(s + e);
}

}  // namespace
}  // namespace detail

Status Engine::prefill_entries(const PrefillParams& pp, void* stream) {
  const EngineConfig& c = impl_->cfg;
  MAC_STATUS_TRY(impl_->validate(pp));
  if (pp.num_positions == 0) return Status::Ok();
  const int P = pp.num_positions, Hq = c.num_q_heads, D = c.head_dim;
  DecodeParams p;  // a launch's params but for its rows (rows of page_table = requests)
  copy_shared_fields(pp, p);
  // Pseudo-row r is request r / P, position r % P. Its queries are evenly spaced when there is
  // one request, one position per request, or requests follow each other at P positions: a
  // launch then reads them where they are, else from a packed copy in the workspace.
  const detail::PrefillQStrides qs = detail::resolve_prefill_q(
      pp.q_request_stride, pp.q_position_stride, pp.q_head_stride, P, Hq, D);
  const bool even = pp.batch == 1 || P == 1 || qs.request == P * qs.position;
  const int64_t row_stride = P == 1 ? qs.request : qs.position;
  uint16_t* const gathered_pre = impl_->pf_q;
  uint16_t* const gathered_post = impl_->pf_q + int64_t{c.max_batch} * Hq * D;
  // Each pseudo-row has its own query and kv_len = p + 1; its band state over
  // [Fe(E(p)), E(p)) is the entry. Processed max_batch pseudo-rows at a time.
  const int64_t total = int64_t{pp.batch} * P;
  std::vector<int32_t> h_pt;
  const cudaStream_t s = as_stream(stream);
  for (int64_t r0 = 0; r0 < total; r0 += c.max_batch) {
    const int n = static_cast<int>(std::min<int64_t>(c.max_batch, total - r0));
    h_pt.assign(3 * n, 0);
    for (int j = 0; j < n; ++j) {
      const int64_t pr = r0 + j, req = pr / P, pos = pp.first_pos_host[req] + pr % P;
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
    if (even) {
      const int64_t at = (r0 / P) * qs.request + (r0 % P) * qs.position;
      q.q_post = pp.q_post + at;
      q.q_pre = pp.q_pre + at;
      q.q_row_stride = row_stride;
      q.q_head_stride = qs.head;
    } else {
      const dim3 grid(n, Hq);
      detail::gather_prefill_q_kernel<<<grid, D / 8, 0, s>>>(pp.q_pre, gathered_pre, r0, P, D,
                                                             qs.request, qs.position, qs.head);
      detail::gather_prefill_q_kernel<<<grid, D / 8, 0, s>>>(pp.q_post, gathered_post, r0, P, D,
                                                             qs.request, qs.position, qs.head);
      MAC_CUDA_TRY(cudaGetLastError());
      q.q_post = gathered_post;
      q.q_pre = gathered_pre;
      q.q_row_stride = int64_t{Hq} * D;
      q.q_head_stride = D;
    }
    q.kv_len = impl_->pf_len;
    q.slot = impl_->pf_slot;
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
