// The launch sequence of a step (docs/semantics.md §3): K1 match → schedule kernel (unless the
// amend kernel schedules itself) → K2 amend → combine (with K3 fused, or K3 on the side stream),
// and which boundaries are programmatic dependent launches.
#include "engine_impl.hpp"

namespace mac::cuda {

Status Engine::Impl::launch(const KParams& kp, int mode, cudaStream_t s) {
  const int D = cfg.head_dim;
  // The step's first kernel follows whatever the caller queued; the rest follow a kernel of
  // this step and may launch as programmatic dependents (EngineConfig::dependent_launch).
  const bool k1 = mode == detail::kModeMac || mode == kModeMatchOnly;
  const bool self = kp.self_schedule != 0;
  if (k1) MAC_CUDA_TRY(detail::launch_match(kp, s));
  if (mode == kModeMatchOnly) return Status::Ok();
  if (!self) MAC_CUDA_TRY(detail::launch_schedule(kp, k1 && (pdl_edges & 1u), s));
  // A self-scheduled amend kernel is the first kernel of a full or prefill step.
  const bool amend_pdl = (k1 || !self) && (pdl_edges & 2u) != 0;
  MAC_CUDA_TRY(MAC_DISPATCH_HEAD_DIM(D, detail::launch_amend_d64, detail::launch_amend_d128,
                                     detail::launch_amend_d256, kp, grid, table_bytes, bulk,
                                     amend_pdl, s));
  const bool side_k3 = mode == detail::kModeMac && !kp.k3_in_combine;
  if (side_k3) {
    // K3 on the side stream: forked after the amend kernel, joined by one event.
    MAC_CUDA_TRY(cudaEventRecord(ev_fork, s));
    MAC_CUDA_TRY(cudaStreamWaitEvent(side, ev_fork, 0));
    MAC_CUDA_TRY(detail::launch_combine(kp, /*k3_only=*/true, /*pdl=*/false, side));
    MAC_CUDA_TRY(cudaEventRecord(ev_join, side));
  }
  const unsigned combine_edge = mode == detail::kModeFull ? 8u : 4u;
  MAC_CUDA_TRY(detail::launch_combine(kp, /*k3_only=*/false, (pdl_edges & combine_edge) != 0, s));
  if (side_k3) MAC_CUDA_TRY(cudaStreamWaitEvent(s, ev_join, 0));
  return Status::Ok();
}

Status Engine::full_attention(const DecodeParams& p, void* stream) {
  MAC_STATUS_TRY(validate(p, StepKind::kFullAttention));
  return impl_->launch(impl_->base(p, detail::kModeFull), detail::kModeFull, as_stream(stream));
}

Status Engine::mac_step(const DecodeParams& p, void* stream) {
  MAC_STATUS_TRY(validate(p, StepKind::kMac));
  return impl_->launch(impl_->base(p, detail::kModeMac), detail::kModeMac, as_stream(stream));
}

}  // namespace mac::cuda
