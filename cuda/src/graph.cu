// CUDA-graph capture and replay of one step.
#include "engine_impl.hpp"
#include "mac/cuda/bench.hpp"

namespace mac::cuda {

namespace {

/*! \brief Captures one launch sequence of `mode` (a detail::Mode, or kModeMatchOnly) into the
 *  engine's graph, replacing any earlier one. `p` has been validated. */
Status capture_mode(Engine::Impl& impl, int mode, const DecodeParams& p, void* stream) {
  if (impl.cfg.max_context > kMaxContext)
    return {StatusCode::kContextTooLong,
            cat("max_context = ", impl.cfg.max_context, " exceeds ", kMaxContext)};
  const KParams kp = impl.base(p, mode == kModeMatchOnly ? detail::kModeMac : mode);
  if (impl.exec) {
    cudaGraphExecDestroy(impl.exec);
    impl.exec = nullptr;
  }
  if (impl.graph) {
    cudaGraphDestroy(impl.graph);
    impl.graph = nullptr;
  }
  const cudaStream_t s = as_stream(stream);
  MAC_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status st = impl.launch(kp, mode, s);
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(s, &g);
  if (!st.ok()) {
    if (g) cudaGraphDestroy(g);
    return st;
  }
  MAC_CUDA_TRY(e);
  impl.graph = g;
  MAC_CUDA_TRY(cudaGraphInstantiate(&impl.exec, g, 0));
  return Status::Ok();
}

}  // namespace

Status Engine::capture(StepKind kind, const DecodeParams& p, void* stream) {
  if (stream == nullptr) return invalid("capture needs a non-default stream (stream_create)");
  MAC_STATUS_TRY(validate(p, kind));
  return capture_mode(*impl_, kind == StepKind::kMac ? detail::kModeMac : detail::kModeFull, p,
                      stream);
}

Status capture_match_only(Engine& engine, const DecodeParams& p, void* stream) {
  if (stream == nullptr) return invalid("capture needs a non-default stream (stream_create)");
  MAC_STATUS_TRY(engine.validate(p, StepKind::kMac));
  return capture_mode(*engine.impl_, kModeMatchOnly, p, stream);
}

Status Engine::replay(void* stream) {
  if (!impl_->exec) return {StatusCode::kNotReady, "replay: nothing captured"};
  MAC_CUDA_TRY(cudaGraphLaunch(impl_->exec, as_stream(stream)));
  return Status::Ok();
}

}  // namespace mac::cuda
