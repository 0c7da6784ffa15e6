#pragma once
// The engine's state (Engine::Impl), shared by the host layers that fill kernel params
// (params.cu), launch a step (step.cu), write prefill entries (prefill.cu) and capture graphs
// (graph.cu); created by engine.cu.
#include <memory>

#include "host_status.hpp"
#include "launch.hpp"
#include "mac/cuda/mac_cuda.hpp"
#include "plan.hpp"

namespace mac::cuda {

namespace detail {
constexpr int kModeMatchOnly = 100;  // host-side only: K1 alone (benchmarking)

/*! \brief FlashAttention-style dispatch on the head dimension: fails loudly otherwise. */
#define MAC_DISPATCH_HEAD_DIM(d, fn64, fn128, fn256, ...) \
  ((d) == 64    ? fn64(__VA_ARGS__)                       \
   : (d) == 128 ? fn128(__VA_ARGS__)                      \
   : (d) == 256 ? fn256(__VA_ARGS__)                      \
                : cudaErrorInvalidValue)
}  // namespace detail

struct Engine::Impl {
  EngineConfig cfg;
  int G = 1, chunk = 0, grid = 0, max_items = 0;  // chunk 0: chosen per step on the device
  bool bulk = false;
  int table_bytes = 0;      // > 0: the amend kernel schedules its own items (ScheduleMode::kAuto)
  int kv_evict_first = -1;  // L2 policy of the K/V stream: −1 per step, else fixed (Tuning)
  int parts_discard = -1;   // the partials' L2 lines dropped after the combine: −1 per step, else
                            // fixed (Tuning)
  int parts_evict_last = -1;  // the partials stored evict_last: −1 where dropped, else fixed
  // Kernel boundaries launched as programmatic dependents: bit 0 K1 → schedule kernel (MAC
  // steps that are not self-scheduled), bit 1 → amend (from K1 or the schedule kernel),
  // bit 2 amend → combine in MAC and prefill steps, bit 3 amend → combine in full-attention
  // steps. config.dependent_launch: bits 0–2 (kPdlDefault), else none; Tuning::pdl_edges
  // (0..15) overrides.
  unsigned pdl_edges = 0;
  detail::WorkspaceLayout layout;
  DeviceBuffer ws;          // the engine's own workspace (empty when the caller's is used)
  char* ws_base = nullptr;  // the workspace in use, ws_bytes long
  size_t ws_bytes = 0;
  // workspace views
  detail::HeadPlan* plans = nullptr;
  uint16_t* snap_o = nullptr;
  float* snap_lse2 = nullptr;
  detail::RowInfo* rows = nullptr;
  detail::GroupDesc* groups = nullptr;
  int* group_off = nullptr;
  int* item_group = nullptr;
  int* work = nullptr;
  float* part_o = nullptr;
  float* part_lse2 = nullptr;
  int* err = nullptr;
  int sms = 132;
  int32_t* pf_pt = nullptr;  // prefill pseudo-rows: page-table row, kv_len, slot
  int32_t* pf_len = nullptr;
  int32_t* pf_slot = nullptr;
  uint16_t* pf_q = nullptr;  // prefill queries gathered: q_pre [N, Hq, D], then q_post
  cudaStream_t side = nullptr;
  cudaEvent_t ev_fork = nullptr, ev_join = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;

  ~Impl() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (ev_fork) cudaEventDestroy(ev_fork);
    if (ev_join) cudaEventDestroy(ev_join);
    if (side) cudaStreamDestroy(side);
  }

  detail::KParams base(const DecodeParams& p, int mode) const;
  /*! \brief Checks a prefill's params against the config (params.cu). */
  Status validate(const PrefillParams& p) const;
  Status launch(const detail::KParams& kp, int mode, cudaStream_t s);
};

// The host layers (engine, params, step, prefill, graph) name these helpers unqualified.
using detail::as_stream;
using detail::cat;
using detail::cuda_status;
using detail::invalid;
using detail::kModeMatchOnly;
using detail::KParams;

}  // namespace mac::cuda
