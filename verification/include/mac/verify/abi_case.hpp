#pragma once
/*! \file abi_case.hpp
 *  \brief The ABI core: a case's inputs laid out, step by step, as the tensors of the plugin
 *         ABI (plugin_abi.h) in one host arena, and the implementation's outputs turned back
 *         into the driver's StepOutput, with the checks that catch an implementation gaming
 *         the driver. No loader here: the plugin loader puts the arena in shared memory with
 *         its worker process, the file protocol writes it to and reads it from HDF5.
 *
 *  Arena contents of a case (every tensor as plugin_abi.h documents it):
 *   - KV pools: the pages of all requests, shuffled (a seeded permutation) in one pool; page
 *     table entries past a request's pages are −1; every token not yet in the cache is NaN.
 *     The prompt's keys are written by begin(), the key of position m by before_step().
 *   - ring: slot p mod M of each prompt position p ∈ [max(0, P−M), P) holds (q̃_p,
 *     attn(q_p, [Fe(E(p)), E(p))), p), the state evaluated in FP64 and rounded once to the
 *     declared ring dtype (L to FP32, base 2 if declared); other slots hold position −1 and
 *     NaN. With a plugin prefill the ring starts all −1/NaN and the prefill inputs are set.
 *   - q, q̃ of the step; outputs poisoned before every call.
 */
#include "mac/verify/check.hpp"
#include "mac/verify/impl.hpp"
#include "mac/verify/plugin_abi.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mac::verify::abi {

/*! \brief The tensors of a case arena. */
enum Tensor : int {
  kQ,
  kQTilde,
  kKCache,
  kVCache,
  kPageTable,
  kPosition,
  kReady,
  kRingQ,
  kRingO,
  kRingLse,
  kRingPos,
  kOut,
  kLse,
  kHit,
  kMatchPos,
  kKeysRead,
  kFullOut,  //!< macv_full_attention's o (present with caps.full_attention)
  kFullLse,
  kPrefQ,  //!< macv_prefill's inputs (present with caps.prefills)
  kPrefQTilde,
  kPrefFirst,
  kPrefCount,
  kRingDepth,  //!< ring chain depths (present with the depth-cap policy)
  kGateState,  //!< per-request gate state [B, 5] (present with the gate policy and W > 0)
  kNumTensors
};
/*! \brief The ABI name of a tensor, e.g. "q_tilde", "ring_o". */
const char* tensor_name(int t);

/*! \brief Where one tensor lies in the arena (plain data: sent to the worker as bytes). */
struct TensorDesc {
  int32_t present = 0, dtype = 0, ndim = 0, reserved = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};  //!< elements
  uint64_t offset = 0;                //!< bytes from the arena's start
  uint64_t bytes = 0;                 //!< extent in bytes, padding included
};

/*! \brief Everything a worker needs to build the ABI structs of a case over its own mapping
 *  of the arena (plain data). */
struct CaseLayout {
  macv_params params{};
  TensorDesc t[kNumTensors];
  uint64_t arena_bytes = 0;
};

/*! \brief A byte range of the arena. */
struct Range {
  uint64_t offset = 0, bytes = 0;
};

/*! \brief The driver's choices for one case among what the implementation declares. */
struct Choices {
  int kv_layout = MACV_KV_NHD;
  int ring_layout = MACV_RING_HEAD_MAJOR;
  int ring_o_dtype = MACV_BF16;
  int out_dtype = MACV_BF16;
  bool lse_base2 = false;
  bool padded_io = false;       //!< q, q̃, o, lse rows and heads padded (NaN in the padding)
  bool plugin_prefill = false;  //!< the implementation builds the prompt entries
  bool full_attention = false;  //!< ineligible heads are compared with macv_full_attention
  bool reports_keys_read = false;
  bool writes_ring = true;
  bool ring_depth = false;  //!< the ring carries chain depths (MACV_POLICY_DEPTH_CAP)
  bool gate = false;        //!< the case's gate state is laid out (MACV_POLICY_GATE, W > 0)
  int variant = 0;          //!< index into caps.variants
  /*! enum macv_decisions: REPORTED lays out hit and match_pos, UNREPORTED neither, EXACT
   *  neither and no ring at all. */
  int decisions = MACV_DECISIONS_REPORTED;
  bool has_ring() const { return decisions != MACV_DECISIONS_EXACT; }
};

/*! \brief What is wrong with declared capabilities ("" if nothing): no KV or ring layout,
 *  a dtype other than F32/BF16, tight tolerances without FP32 outputs and ring, a count out
 *  of its array, a device other than CPU/CUDA, `decisions` outside 0..2, a plain decode
 *  kernel (MACV_DECISIONS_EXACT) declaring a ring write, prefill, full attention or policy. */
std::string validate_caps(const macv_caps& caps);
/*! \brief Why case `c` is outside what `caps` declares (head dim, GQA ratio, page size,
 *  sinks, context, ring size, batch, policies), or "" if it is applicable. For a plain decode
 *  kernel (MACV_DECISIONS_EXACT) only the shape counts (head dim, GQA ratio, page size,
 *  context, batch): sinks, ring size and policies change no exact attention. */
std::string not_applicable(const macv_caps& caps, const CaseSpec& c);
/*! \brief The layouts and dtypes of case `c`: where the implementation declares two KV or
 *  ring layouts they alternate with the case id (both are exercised), padded q/q̃/o/lse on
 *  every other case with strided_io. */
Choices choose(const macv_caps& caps, const CaseSpec& c);
/*! \brief docs/semantics.md §4's limits, or the FP32 reference's when the implementation asks for
 * them (tight_tolerances, FP32 outputs and ring). */
Tolerances tolerances(const macv_caps& caps);
/*! \brief How the expected evaluation stores ring entries: as the implementation's ring does
 *  (BF16 o → kProduction, FP32 → kFull). */
StateStorage expected_storage(const macv_caps& caps);
/*! \brief What the outputs of an implementation declaring `caps.decisions` are graded against. */
Grading grading(const macv_caps& caps);

/*! \brief Capabilities as `key = value` lines (the file protocol's declaration, and the
 *  certificate's record of a plugin's); lists comma-separated, "any" for an empty list. */
std::string caps_to_text(const macv_caps& caps);
/*! \brief Parses caps_to_text's format; keys not given keep their defaults (any head dim,
 *  GQA ratio and page size, NHD, head-major ring, no sinks limit, BF16 o and ring o, natural
 *  LSE, writes the ring). InputError names an unknown key or a bad value. */
macv_caps caps_from_text(const std::string& text);

/*! \brief An ABI tensor over `base` (the arena as mapped by the caller); shape and strides
 *  point into `layout`, which must outlive the tensor. A tensor not present has data NULL. */
macv_tensor tensor(const CaseLayout& layout, int t, void* base, int device, int device_id);
macv_step_inputs step_inputs(const CaseLayout& layout, void* base, int device, int device_id);
/*! \brief The step's outputs, or with `full` the full-attention outputs (o, lse only). */
macv_step_outputs step_outputs(const CaseLayout& layout, void* base, int device, int device_id,
                               bool full = false);
macv_prefill_inputs prefill_inputs(const CaseLayout& layout, void* base, int device, int device_id);

/*! \brief What a device mirror reads back after every call: the ring and the outputs, and the
 *  inputs too, so that their check sees the device's copy (everything but the prefill
 *  inputs). */
std::vector<Range> readback(const CaseLayout& layout);

/*! \brief Element `i` of an F32 or BF16 array at `p`. */
double load_float(const uint8_t* p, int dtype, int64_t i);
/*! \brief Stores `x` as element `i` of an F32 or BF16 array (rounded to nearest even). */
void store_float(uint8_t* p, int dtype, int64_t i, double x);

/*! \brief A 64-bit hash of bytes (not cryptographic: it detects a changed input, it does not
 *  resist an adversary who computes collisions). */
uint64_t hash_bytes(const void* data, size_t bytes);

/*! \brief One case in ABI form, driven step by step. The arena is the caller's memory
 *  (layout().arena_bytes bytes, attached before begin()).
 *
 *  Per step: before_step(s) writes the inputs of step s, poisons the outputs, hashes the
 *  inputs and snapshots the ring; the implementation runs; after_step(s) checks and converts.
 *  Problems found by the checks are returned as a message: the implementation fails the case
 *  with it. What each check rules out:
 *   - outputs poisoned (NaN, hit 0xA5, −2): an output left unwritten passing with a value from
 *     an earlier call;
 *   - inputs hashed before and after (q, q̃ with their padding, KV pools, page table,
 *     positions, readiness): a kernel writing into its inputs (scratch in the cache, in-place
 *     RoPE), which could pass one step and corrupt the next;
 *   - every ring slot but m mod M of a ready request bit-identical: state smuggled into other
 *     slots, writes for requests that are not ready, an entry in the wrong slot;
 *   - the gate state of a request that is not ready unchanged (an ineligible step leaves it
 *     alone); every row is compared with the expected state by run_case;
 *   - tokens beyond kv_len NaN in the cache: reading keys the step may not see;
 *   - inputs drawn with the run's nonce (RunOptions::nonce): answers cached from another run.
 *  A kernel returning the previous step's output fails the value checks: every step's inputs
 *  differ. */
class AbiCase {
 public:
  AbiCase(const CaseInputs& in, const Choices& choices);
  const CaseLayout& layout() const { return layout_; }
  const Choices& choices() const { return ch_; }
  void attach(uint8_t* arena) { arena_ = arena; }
  uint8_t* arena() const { return arena_; }

  /*! \brief Poisons the arena, writes the page table, the prompt's keys and values, the
   *  readiness and the initial ring (or, with a plugin prefill, an empty ring and the prefill
   *  inputs; with `build_ring` false an empty ring the caller fills). Marks the whole arena
   *  dirty. */
  void begin(bool build_ring = true);
  /*! \brief After the implementation's prefill: every prompt position's slot holds it, its q̃
   *  is a bit copy, its L is −inf iff its range is empty (the states are checked where they
   *  are reused), and every other slot is untouched. Returns the first problem or "". */
  std::string check_prefill() const;
  /*! \brief Writes step s's inputs (the key and value of every request's position m, q, q̃,
   *  positions), poisons the outputs, hashes the inputs and snapshots the ring. */
  void before_step(int64_t s);
  /*! \brief Checks the inputs are unchanged and no ring slot changed that may not; converts
   *  the outputs and the ring slot m mod M into `out` ([B][Hq]). Returns the first problem
   *  or "". */
  std::string after_step(int64_t s, StepOutput* out);

  /*! \brief Byte ranges written by begin()/before_step() since the last clear_dirty() (what
   *  a device mirror must upload). */
  const std::vector<Range>& dirty() const { return dirty_; }
  void clear_dirty() { dirty_.clear(); }
  /*! \brief Request b's gate state row as the implementation left it (bytes_mac,
   *  bytes_full, hits, steps, off_left); false when the case lays out no gate state. */
  bool gate_state(int b, std::array<int64_t, 5>* out) const;
  /*! \brief Position m of request b at step s. */
  int64_t position(int b, int64_t s) const;
  /*! \brief Element offset of ring slot (b, h, slot j): of its first element in ring_q and
   *  ring_o (`vector`), or of its element in ring_lse and ring_pos. */
  int64_t ring_offset(int b, int h, int64_t j, bool vector) const;
  template <typename T>
  T* data(int t) const {
    return reinterpret_cast<T*>(arena_ + layout_.t[t].offset);
  }

 private:
  void add_tensor(int t, int dtype, std::vector<int64_t> shape, std::vector<int64_t> strides);
  void mark(int t) { dirty_.push_back({layout_.t[t].offset, layout_.t[t].bytes}); }
  void poison(int t);
  void write_token(int b, int64_t t);
  void host_prefill();
  uint64_t hash(int t) const {
    return hash_bytes(arena_ + layout_.t[t].offset, layout_.t[t].bytes);
  }

  const CaseInputs& in_;
  Choices ch_;
  CaseLayout layout_;
  uint8_t* arena_ = nullptr;
  std::vector<int32_t> page_table_;  //!< [B, max_pages] host copy
  std::vector<Range> dirty_;
  std::vector<uint64_t> input_hash_;  //!< per input tensor, before the call
  std::vector<uint8_t>
      ring_before_[5];  //!< ring_q, ring_o, ring_lse, ring_pos, ring_depth snapshots
  /*! gate_state before the call */
  std::vector<int64_t> gate_before_;
};

}  // namespace mac::verify::abi
