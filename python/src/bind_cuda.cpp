// The CUDA host API (mac/cuda/mac_cuda.hpp) with device pointers and streams as integers, so
// that any framework's tensors can be passed (macattn.torch_ops passes torch's). Built
// against the stub where the kernels are not, whose calls raise NoCudaError.
#include "bindings.hpp"

#include "mac/cuda/mac_cuda.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace macattn {

namespace cu = mac::cuda;
using mac::InputError;
using mac::msg;

namespace {

nb::handle g_no_cuda_error;  // macattn.NoCudaError (set in bind_cuda)

/*! Raises the Python exception of a failed status: InputError for bad arguments and shapes,
 *  NoCudaError without CUDA, RuntimeError for a CUDA error. */
void check(const cu::Status& s, const char* what) {
  if (s.ok()) return;
  const std::string m = msg(what, ": ", cu::to_string(s.code), ": ", s.message);
  switch (s.code) {
    case cu::StatusCode::kInvalidArgument:
    case cu::StatusCode::kUnsupported:
    case cu::StatusCode::kContextTooLong: throw InputError(m);
    case cu::StatusCode::kNoCuda:
      PyErr_SetString(g_no_cuda_error.ptr(), m.c_str());
      throw nb::python_error();
    default: throw std::runtime_error(m);
  }
}

void* as_stream(uintptr_t s) { return reinterpret_cast<void*>(s); }

cu::StepKind parse_kind(const std::string& k) {
  if (k == "mac") return cu::StepKind::kMac;
  if (k == "full") return cu::StepKind::kFullAttention;
  throw InputError(msg("kind '", k, "' is not one of: mac, full"));
}

/*! The one place that fills the prefill parameters (their struct is the API's to change). */
cu::PrefillParams make_prefill(const cu::DecodeParams& kv, int batch, int num_positions,
                               const std::vector<int64_t>& first_pos,
                               const std::vector<int32_t>& slot, uintptr_t q_pre,
                               uintptr_t q_post) {
  if (first_pos.size() != static_cast<size_t>(batch) || slot.size() != static_cast<size_t>(batch))
    throw InputError(msg("prefill_entries: first_pos (", first_pos.size(), ") and slot (",
                         slot.size(), ") must hold one value per request (batch = ", batch, ")"));
  cu::PrefillParams p = cu::PrefillParams::from_decode(kv);
  p.batch = batch;
  p.num_positions = num_positions;
  p.first_pos_host = first_pos.data();
  p.slot_host = slot.data();
  p.q_pre = reinterpret_cast<const uint16_t*>(q_pre);
  p.q_post = reinterpret_cast<const uint16_t*>(q_post);
  return p;
}

/*! An Engine and the config it was made with. */
struct PyEngine {
  std::unique_ptr<cu::Engine> e;
};

}  // namespace

#define MACATTN_PTR(name, doc)                                                                  \
  def_prop_rw(                                                                                  \
      #name, [](const cu::DecodeParams& p) { return reinterpret_cast<uintptr_t>(p.name); },     \
      [](cu::DecodeParams& p, uintptr_t v) { p.name = reinterpret_cast<decltype(p.name)>(v); }, \
      doc)

void bind_cuda(nb::module_& root) {
  nb::module_ m = root.def_submodule("cuda", "The BF16 CUDA kernels' host API (mac::cuda).");
  g_no_cuda_error = root.attr("NoCudaError");
  m.def("built_with_cuda", &cu::built_with_cuda, "True iff the kernels were compiled in.");
  m.def("device_present", &cu::cuda_device_present,
        "True iff built with CUDA and a CUDA device is usable.");
  m.def("device_description", &cu::device_description);
  m.attr("MAX_CONTEXT") = cu::kMaxContext;
  m.attr("MAX_GROUP") = cu::kMaxGroup;

  nb::class_<cu::DecodeParams>(m, "DecodeParams",
                               "One decode step's pointers, strides and parameters "
                               "(mac::cuda::DecodeParams); pointers are device addresses as "
                               "integers, strides in elements, 0 = packed.")
      .def(nb::init<>())
      .def_rw("batch", &cu::DecodeParams::batch)
      .MACATTN_PTR(q_post, "[N, Hq, D] bf16, post-RoPE query")
      .MACATTN_PTR(q_pre, "[N, Hq, D] bf16, pre-RoPE query")
      .def_rw("q_row_stride", &cu::DecodeParams::q_row_stride)
      .def_rw("q_head_stride", &cu::DecodeParams::q_head_stride)
      .MACATTN_PTR(k_cache, "[num_pages, page_size, Hkv, D] bf16, post-RoPE keys")
      .MACATTN_PTR(v_cache, "[num_pages, page_size, Hkv, D] bf16")
      .def_rw("num_pages", &cu::DecodeParams::num_pages)
      .def_rw("page_size", &cu::DecodeParams::page_size)
      .def_rw("kv_page_stride", &cu::DecodeParams::kv_page_stride)
      .def_rw("kv_token_stride", &cu::DecodeParams::kv_token_stride)
      .def_rw("kv_head_stride", &cu::DecodeParams::kv_head_stride)
      .MACATTN_PTR(page_table, "[N, max_pages_per_row] int32")
      .def_rw("max_pages_per_row", &cu::DecodeParams::max_pages_per_row)
      .MACATTN_PTR(kv_len, "[N] int32, m + 1")
      .def_rw("softmax_scale", &cu::DecodeParams::softmax_scale)
      .def_rw("tau", &cu::DecodeParams::tau)
      .def_rw("ring", &cu::DecodeParams::ring)
      .def_rw("tail", &cu::DecodeParams::tail)
      .def_rw("sinks", &cu::DecodeParams::sinks)
      .def_rw("gen_min", &cu::DecodeParams::gen_min)
      .MACATTN_PTR(slot, "[N] int32 request slot of each row")
      .def_rw("num_slots", &cu::DecodeParams::num_slots)
      .MACATTN_PTR(ring_q_pre, "[R, M, Hq, D] bf16")
      .MACATTN_PTR(ring_o, "[R, M, Hq, D] bf16")
      .MACATTN_PTR(ring_lse, "[R, M, Hq] fp32, natural log, -inf = empty")
      .MACATTN_PTR(ready, "[R] int32")
      .MACATTN_PTR(epoch_a, "[R] int32")
      .MACATTN_PTR(epoch_b, "[R] int32")
      .MACATTN_PTR(out, "[N, Hq, D] bf16")
      .def_rw("out_row_stride", &cu::DecodeParams::out_row_stride)
      .def_rw("out_head_stride", &cu::DecodeParams::out_head_stride)
      .MACATTN_PTR(lse, "[N, Hq] fp32, natural log (0: not written)")
      .def_rw("lse_row_stride", &cu::DecodeParams::lse_row_stride)
      .def_rw("lse_head_stride", &cu::DecodeParams::lse_head_stride)
      .MACATTN_PTR(diag_hit, "[N, Hq] int8 (0: not written)")
      .MACATTN_PTR(diag_match_pos, "[N, Hq] int64")
      .MACATTN_PTR(diag_d2, "[N, Hq] fp32")
      .MACATTN_PTR(diag_keys_read, "[N, Hq] int32");

  nb::class_<PyEngine>(m, "Engine",
                       "mac::cuda::Engine: workspace, side stream and events for steps of one "
                       "shape. Not thread-safe; one per stream of work.")
      .def(
          "__init__",
          [](PyEngine* self, int max_batch, int num_q_heads, int num_kv_heads, int head_dim,
             int max_context, int ring, int kv_chunk, const std::string& k3_mode,
             const std::string& amend, const std::string& schedule, bool dependent_launch,
             int device, int kv_evict_first, int parts_discard, int parts_evict_last, int pdl_edges,
             int amend_blocks_per_sm, int amend_blocks) {
            cu::EngineConfig c;
            c.max_batch = max_batch;
            c.num_q_heads = num_q_heads;
            c.num_kv_heads = num_kv_heads;
            c.head_dim = head_dim;
            c.max_context = max_context;
            c.ring = ring;
            c.kv_chunk = kv_chunk;
            if (k3_mode == "fused")
              c.k3_mode = cu::K3Mode::kFused;
            else if (k3_mode == "side_stream")
              c.k3_mode = cu::K3Mode::kSideStream;
            else
              throw InputError(msg("k3_mode '", k3_mode, "' is not one of: fused, side_stream"));
            if (amend == "default")
              c.amend = cu::AmendVariant::kDefault;
            else if (amend == "cpasync")
              c.amend = cu::AmendVariant::kCpAsync;
            else if (amend == "bulk")
              c.amend = cu::AmendVariant::kBulk;
            else
              throw InputError(msg("amend '", amend, "' is not one of: default, cpasync, bulk"));
            if (schedule == "auto")
              c.schedule = cu::ScheduleMode::kAuto;
            else if (schedule == "kernel")
              c.schedule = cu::ScheduleMode::kKernel;
            else
              throw InputError(msg("schedule '", schedule, "' is not one of: auto, kernel"));
            c.dependent_launch = dependent_launch;
            c.device = device;
            c.tuning.kv_evict_first = kv_evict_first;
            c.tuning.parts_discard = parts_discard;
            c.tuning.parts_evict_last = parts_evict_last;
            c.tuning.pdl_edges = pdl_edges;
            c.tuning.amend_blocks_per_sm = amend_blocks_per_sm;
            c.tuning.amend_blocks = amend_blocks;
            std::unique_ptr<cu::Engine> e;
            check(cu::Engine::create(c, &e), "Engine.create");
            new (self) PyEngine{std::move(e)};
          },
          "max_batch"_a, "num_q_heads"_a, "num_kv_heads"_a, "head_dim"_a,
          "max_context"_a = cu::kMaxContext, "ring"_a = 512, "kv_chunk"_a = 0,
          "k3_mode"_a = "fused", "amend"_a = "default", "schedule"_a = "auto",
          "dependent_launch"_a = true, "device"_a = 0, "kv_evict_first"_a = -1,
          "parts_discard"_a = -1, "parts_evict_last"_a = -1, "pdl_edges"_a = -1,
          "amend_blocks_per_sm"_a = 0, "amend_blocks"_a = 0,
          "Engine::create with an EngineConfig of these fields (Tuning's flattened).")
      .def(
          "validate",
          [](const PyEngine& s, const cu::DecodeParams& p, const std::string& kind) {
            check(s.e->validate(p, parse_kind(kind)), "validate");
          },
          "params"_a, "kind"_a = "mac", "Checks params against the config on the host.")
      .def(
          "mac_step",
          [](PyEngine& s, const cu::DecodeParams& p, uintptr_t stream) {
            cu::Status st;
            {
              nb::gil_scoped_release nogil;
              st = s.e->mac_step(p, as_stream(stream));
            }
            check(st, "mac_step");
          },
          "params"_a, "stream"_a, "One MAC decode step on `stream` (cudaStream_t as int).")
      .def(
          "full_attention",
          [](PyEngine& s, const cu::DecodeParams& p, uintptr_t stream) {
            cu::Status st;
            {
              nb::gil_scoped_release nogil;
              st = s.e->full_attention(p, as_stream(stream));
            }
            check(st, "full_attention");
          },
          "params"_a, "stream"_a, "Exact paged decode of every row on `stream`.")
      .def(
          "prefill_entries",
          [](PyEngine& s, const cu::DecodeParams& kv, int batch, int num_positions,
             const std::vector<int64_t>& first_pos, const std::vector<int32_t>& slot,
             uintptr_t q_pre, uintptr_t q_post, uintptr_t stream) {
            const cu::PrefillParams p =
                make_prefill(kv, batch, num_positions, first_pos, slot, q_pre, q_post);
            cu::Status st;
            {
              nb::gil_scoped_release nogil;
              st = s.e->prefill_entries(p, as_stream(stream));
            }
            check(st, "prefill_entries");
          },
          "kv"_a, "batch"_a, "num_positions"_a, "first_pos"_a, "slot"_a, "q_pre"_a, "q_post"_a,
          "stream"_a,
          "Ring entries of positions first_pos[i] + j (j < num_positions) of request i into "
          "slot[i]; q_pre/q_post [batch, num_positions, Hq, D] bf16; kv supplies the KV pools, "
          "page table (rows = requests), rings and scalars. Synchronous on `stream`.")
      .def(
          "capture",
          [](PyEngine& s, const std::string& kind, const cu::DecodeParams& p, uintptr_t stream) {
            check(s.e->capture(parse_kind(kind), p, as_stream(stream)), "capture");
          },
          "kind"_a, "params"_a, "stream"_a,
          "Captures one step into the engine's own CUDA graph (needs a non-default stream).")
      .def(
          "replay",
          [](PyEngine& s, uintptr_t stream) {
            cu::Status st;
            {
              nb::gil_scoped_release nogil;
              st = s.e->replay(as_stream(stream));
            }
            check(st, "replay");
          },
          "stream"_a, "Replays the engine's captured graph on `stream`.")
      .def(
          "read_error_flags",
          [](PyEngine& s, bool reset, uintptr_t stream) {
            int f = 0;
            check(s.e->read_error_flags(&f, reset, as_stream(stream)), "read_error_flags");
            return f;
          },
          "reset"_a = true, "stream"_a = 0,
          "Device error flags since the last reset (bit 0 kv_len, bit 1 slot, bit 2 page id).")
      .def_prop_ro("workspace_bytes", [](const PyEngine& s) { return s.e->workspace_bytes(); })
      .def_prop_ro("max_batch", [](const PyEngine& s) { return s.e->config().max_batch; })
      .def_prop_ro("max_context", [](const PyEngine& s) { return s.e->config().max_context; })
      .def_prop_ro("ring", [](const PyEngine& s) { return s.e->config().ring; })
      .def_prop_ro("device", [](const PyEngine& s) { return s.e->config().device; });
}

#undef MACATTN_PTR

}  // namespace macattn
