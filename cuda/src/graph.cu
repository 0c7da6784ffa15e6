// CUDA-graph capture and replay of one step.
#include "engine_impl.hpp"

namespace mac::cuda {

using detail::as_stream;
using detail::cat;
using detail::cuda_status;
using detail::invalid;
using detail::kModeMatchOnly;
using detail::KParams;

Status Engine::capture(StepKind kind, const DecodeParams& p, void* stream) {
  if (stream == nullptr) return invalid("capture needs a non-default stream (stream_create)");
  MAC_STATUS_TRY(validate(p, kind == StepKind::kMatchOnly ? StepKind::kMac : kind));
  if (impl_->cfg.max_context > kMaxContext)
    return {StatusCode::kContextTooLong,
            cat("max_context = ", impl_->cfg.max_context, " exceeds ", kMaxContext)};
  const int mode = kind == StepKind::kMac         ? detail::kModeMac
                   : kind == StepKind::kMatchOnly ? kModeMatchOnly
                                                  : detail::kModeFull;
  const KParams kp = impl_->base(p, mode == kModeMatchOnly ? detail::kModeMac : mode);
  if (impl_->exec) {
    cudaGraphExecDestroy(impl_->exec);
    impl_->exec = nullptr;
  }
  if (impl_->graph) {
    cudaGraphDestroy(impl_->graph);
    impl_->graph = nullptr;
  }
  const cudaStream_t s = as_stream(stream);
  MAC_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status st = impl_->launch(kp, mode, s);
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(s, &g);
  if (!st.ok()) {
    if (g) cudaGraphDestroy(g);
    return st;
  }
  MAC_CUDA_TRY(e);
  impl_->graph = g;
  MAC_CUDA_TRY(cudaGraphInstantiate(&impl_->exec, g, 0));
  return Status::Ok();
}

Status Engine::replay(void* stream) {
  if (!impl_->exec) return {StatusCode::kNotReady, "replay: nothing captured"};
  MAC_CUDA_TRY(cudaGraphLaunch(impl_->exec, as_stream(stream)));
  return Status::Ok();
}

}  // namespace mac::cuda
