#ifndef MAC_VERIFY_PLUGIN_ABI_H
#define MAC_VERIFY_PLUGIN_ABI_H
/*! \file plugin_abi.h
 *  \brief The C ABI of an implementation under test ("plugin") of mac-verify, version 1.
 *
 *  C99, no C++ types. A plugin is a shared object exporting five functions
 *  (macv_abi_version, macv_query, macv_create, macv_step, macv_destroy) and, where its
 *  capabilities say so, up to three more (macv_prefill, macv_full_attention, macv_check).
 *  `mac-verify --impl plugin:PATH.so` loads it in a child process, so a crash, a hang or a
 *  CUDA error costs one case (reported as ERROR with the message), not the run.
 *  docs/verification.md walks through a complete plugin (plugins/minimal_c/minimal_plugin.c).
 *
 *  One call of macv_step is one decode step of docs/semantics.md §3 for a batch of B requests of
 * one layer shape (D, Hq = G·Hkv, Hkv); for a plain decode kernel (caps.decisions =
 * MACV_DECISIONS_EXACT) one step of exact attention, without the ring. The driver owns every
 * buffer: the paged KV cache, the page table, positions, readiness, the queries, the ring (q̃, o, L
 * and position per slot) and the outputs (destination passing). The plugin reads the inputs, reads
 * the ring, writes ring slot `m mod M` of each ready request (if it declares `writes_ring`), and
 * writes the outputs. Everything it needs from one step to the next is in the ring (and, for the
 * adaptive gate, in gate_state): the driver may hand the same handle inputs it has never seen.
 *
 *  What the driver checks besides the results (each rules out a way of gaming it):
 *   - every output is filled with NaN (integers with an invalid value) before every call,
 *     so an output the plugin does not write is caught, never taken from an earlier call;
 *   - every input (q, q̃, K/V pages, page table, positions, readiness, stride padding) is
 *     hashed before and after each call and must be unchanged;
 *   - every ring slot the plugin did not declare it writes (all but `m mod M` of the ready
 *     requests) must be bit-identical after the call;
 *   - with MACV_POLICY_GATE, every row of gate_state must equal the reference's gate state
 *     after every step, and the rows of requests that are not ready must be unchanged;
 *   - inputs are drawn afresh for every run (a nonce mixed into every case's seed), so an
 *     answer cached from an earlier run cannot pass.
 *
 *  Tensors are described like DLPack: data pointer, dtype code, rank, shape and strides in
 *  elements (not bytes), device. The innermost stride of every tensor is 1, and the other
 *  strides of q, q̃ and o are multiples of 8 elements (16-byte rows). Within that the driver
 *  chooses: padded rows and heads for q, q̃, o and lse when the plugin declares `strided_io`
 *  (the padding holds NaN), either KV layout and either ring layout it declares. A plugin
 *  honours the strides it is given or rejects the call with an error naming the tensor.
 *
 *  LSE is the natural log (docs/semantics.md §4). A plugin that works in base 2 declares
 * `lse_base2`; the driver then gives it the ring L in base 2 and converts its output and ring L
 * back with mac::lse_from_log2 (reference/include/mac/semantics.hpp).
 *
 *  Error reporting: a function returning int32_t returns 0 on success; non-zero means
 *  failure, with a NUL-terminated message (at most err_len bytes, err_len ≥ 1) in `err`.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Marks the entry points exported, also from a library built with hidden visibility. */
#if defined(__GNUC__)
#define MACV_API __attribute__((visibility("default")))
#else
#define MACV_API
#endif

/*! \brief The ABI version this header describes; macv_abi_version() returns it.
 *
 *  Still 1 with the fields appended to macv_caps since (`decisions`): the driver zeroes the
 *  struct and sets struct_size before macv_query, so a plugin built before a field leaves it 0,
 *  which means that plugin's behaviour (it reports hit and match_pos); and a plugin writes an
 *  appended field only where struct_size covers it (MACV_CAPS_HAS), so it also loads in a
 *  driver whose struct ends before the field. Everything else is unchanged. */
#define MACV_ABI_VERSION 1

/*! \brief Element types. */
enum macv_dtype {
  MACV_F32 = 0,
  MACV_BF16 = 1, /*!< IEEE bfloat16 bits (uint16), round-to-nearest-even */
  MACV_I32 = 2,
  MACV_I64 = 3,
  MACV_U8 = 4,
  MACV_F64 = 5
};

/*! \brief Where a tensor's memory lives. */
enum macv_device { MACV_DEVICE_CPU = 1, MACV_DEVICE_CUDA = 2 };

/*! \brief KV cache layouts (bit mask in macv_caps.kv_layouts). */
enum macv_kv_layout {
  MACV_KV_NHD = 1, /*!< k_cache/v_cache [num_pages, page_size, Hkv, D] */
  MACV_KV_HND = 2  /*!< k_cache/v_cache [num_pages, Hkv, page_size, D] */
};

/*! \brief Memory orders of the ring (bit mask in macv_caps.ring_layouts). The ring tensors'
 *  logical shapes are always [B, Hq, M, D] (q̃, o) and [B, Hq, M] (L, position); the layout
 *  only changes their strides. */
enum macv_ring_layout {
  MACV_RING_HEAD_MAJOR = 1, /*!< memory [B, Hq, M, D]: a head's M slots are contiguous */
  MACV_RING_SLOT_MAJOR = 2  /*!< memory [B, M, Hq, D]: a slot's Hq heads are contiguous (the
                                 layout of this project's CUDA ring) */
};

/*! \brief Policies of semantics §3.3 (bit mask in macv_caps.policies). A case that sets a
 *  policy the plugin does not declare is NOT APPLICABLE. */
enum macv_policy {
  MACV_POLICY_DEPTH_CAP = 1, /*!< params.depth_cap ≥ 0: a would-be hit on an entry of chain
                                  depth ≥ depth_cap misses; needs ring_depth */
  MACV_POLICY_REFRESH = 2,   /*!< params.refresh > 0: head h misses at every m with
                                  (m + ⌊h·refresh/Hq⌋) mod refresh = 0 */
  MACV_POLICY_GATE = 4       /*!< params.gate_window > 0: the adaptive gate of docs/semantics.md
                                  §3.5 (reference/include/mac/ref/gate.hpp), its per-request
                                  state in macv_step_inputs.gate_state */
};

/*! \brief What a step reports of its decisions (macv_caps.decisions), and so what it is graded
 *  against. */
enum macv_decisions {
  /*! A MAC kernel that writes hit and match_pos (the value of a plugin built before the field):
   *  every decision is checked against docs/semantics.md §3, and the outputs and ring entries
   *  against the FP64 oracle at those decisions. */
  MACV_DECISIONS_REPORTED = 0,
  /*! A MAC kernel that does not expose its decisions: hit and match_pos are NULL. Its outputs
   *  and ring entries are graded against the FP64 oracle at the *expected* decisions; no
   *  decision is checked, so a different decision shows only where it moves a value past the
   *  tolerances. Everything else (ring, keys_read, full attention, the checks below) as 0. */
  MACV_DECISIONS_UNREPORTED = 1,
  /*! A plain decode kernel: it never reuses, every step's o and lse are exact attention
   *  attn(q_m, [0, m]), graded against the FP64 oracle's. It has no ring: ring_q, ring_o,
   *  ring_lse, ring_pos, ring_depth, hit and match_pos are NULL, and it must declare
   *  writes_ring, prefills, full_attention and policies 0 (ring_layouts and sinks are then
   *  ignored). The MAC-specific checks (decisions, ring entries, eligibility, policies) do not
   *  apply; every case whose shape it supports is applicable, and all the output checks of
   *  every case apply (tokens beyond kv_len NaN, inputs unchanged, outputs poisoned). */
  MACV_DECISIONS_EXACT = 2
};

/*! \brief Whether a plugin may write field `f` of *caps: struct_size (set by the driver) covers
 *  it. Needed for the fields appended after version 1's first layout (`decisions`). */
#define MACV_CAPS_HAS(caps, f) ((caps)->struct_size >= offsetof(macv_caps, f) + sizeof((caps)->f))

/*! \brief A strided tensor (DLPack-like). `shape` and `strides` have `ndim` entries; strides
 *  are in elements. `data == NULL` means "not provided / not wanted". */
typedef struct macv_tensor {
  void* data;
  int32_t dtype; /*!< enum macv_dtype */
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
  int32_t device;    /*!< enum macv_device */
  int32_t device_id; /*!< CUDA ordinal; 0 on the CPU */
} macv_tensor;

/*! \brief What a plugin can run, filled by macv_query. A list with count 0 means "any
 *  value"; a limit of 0 means "no limit". Cases outside these limits are reported NOT
 *  APPLICABLE with the reason, counted apart, never as passed. */
typedef struct macv_caps {
  uint32_t struct_size; /*!< sizeof(macv_caps), set by the driver before the call */
  char name[64];        /*!< declared implementation name (NUL-terminated) */
  char version[32];     /*!< declared implementation version (NUL-terminated) */
  int32_t device;       /*!< enum macv_device the plugin's tensors must live on */
  int32_t head_dims[8]; /*!< supported D */
  int32_t num_head_dims;
  int32_t gqa_ratios[16]; /*!< supported G = Hq / Hkv */
  int32_t num_gqa_ratios;
  int32_t page_sizes[8]; /*!< supported KV page sizes */
  int32_t num_page_sizes;
  int32_t kv_layouts;         /*!< bit mask of enum macv_kv_layout (at least one) */
  int32_t ring_layouts;       /*!< bit mask of enum macv_ring_layout (at least one) */
  int32_t sinks;              /*!< 1: supports F > 0 */
  int64_t max_context;        /*!< largest kv_len (0: no limit) */
  int64_t ring_min, ring_max; /*!< supported M (0: no limit) */
  int32_t max_batch;          /*!< largest B (0: no limit) */
  int32_t out_dtype;          /*!< dtype of the output o it writes: MACV_F32 or MACV_BF16 */
  int32_t ring_o_dtype;       /*!< dtype of ring o: MACV_F32, or MACV_BF16 (docs/semantics.md §4
                                 production) */
  int32_t lse_base2;          /*!< 1: its lse and ring L are base 2 (the driver converts) */
  int32_t strided_io;         /*!< 1: honours padded row/head strides of q, q̃, o and lse */
  int32_t reports_keys_read;  /*!< 1: writes keys_read */
  int32_t writes_ring; /*!< 1: writes ring slot m mod M of ready requests (docs/semantics.md §3
                            step 4); 0: the ring is read-only for it */
  int32_t graph_capturable; /*!< 1: macv_step may be captured into a CUDA graph on `stream`
                                 and replayed for later steps (pointers stay the same, the
                                 contents change) */
  int32_t prefills;         /*!< 1: exports macv_prefill, which builds the prompt entries
                                 (otherwise the driver hands over a ring holding them) */
  int32_t full_attention;   /*!< 1: exports macv_full_attention; the driver then requires the
                                 output of every ineligible head (m < gen_min, not ready,
                                 m = 0) to be bit-identical to it */
  int32_t checks;           /*!< 1: exports macv_check, called after every step */
  int32_t tight_tolerances; /*!< 1: asks to be judged by the FP32 reference's limits (needs
                                 out_dtype and ring_o_dtype MACV_F32); 0: docs/semantics.md §4's */
  int32_t num_variants;     /*!< code paths the driver should spread the cases over (0: one) */
  char variants[4][16];     /*!< their names: a case whose matrix column `k3` names one runs
                                 that one, the others alternate with the case id */
  int32_t policies;         /*!< bit mask of enum macv_policy it implements (0: none; a
                                 policy-forced miss is a miss of §3: exact attention, exact
                                 entry of depth 0 written when ready) */
  /* Appended after version 1's first layout; write only if MACV_CAPS_HAS(caps, field). */
  int32_t decisions; /*!< enum macv_decisions (0: reports hit and match_pos) */
} macv_caps;

/*! \brief Parameters of one case, fixed for the handle's life. */
typedef struct macv_params {
  int32_t head_dim, num_q_heads, num_kv_heads, batch; /*!< D, Hq, Hkv, B */
  int32_t page_size;                                  /*!< tokens per KV page */
  int32_t kv_layout;                                  /*!< enum macv_kv_layout of this case */
  int32_t ring_layout;                                /*!< enum macv_ring_layout of this case */
  int32_t num_pages;                                  /*!< pages in each of k_cache, v_cache */
  int32_t max_pages_per_request;                      /*!< columns of page_table */
  int32_t device_id;                                  /*!< CUDA ordinal of every tensor */
  int32_t variant; /*!< index into caps.variants chosen for the case (0 if none declared) */
  int64_t ring, tail, sinks, gen_min; /*!< M, r, F, gen_min (docs/semantics.md §3) */
  double tau;                         /*!< τ */
  float threshold;      /*!< thr = 2·D·(1 − τ)² rounded once to FP32; hit iff d2 < thr */
  double softmax_scale; /*!< s in exp(s·q·k) */
  int64_t max_context;  /*!< largest kv_len of any step of the case */
  int64_t depth_cap;    /*!< K of MACV_POLICY_DEPTH_CAP; −1: no cap */
  int64_t refresh;      /*!< N of MACV_POLICY_REFRESH; 0: no refresh */
  /* Appended after version 1's first layout: the gate of MACV_POLICY_GATE (docs/semantics.md
   * §3.5; MacParams in reference/include/mac/ref/common.hpp). A plugin built before them never
   * reads them; the driver gives a case with gate_window > 0 only to a plugin declaring
   * MACV_POLICY_GATE. */
  int64_t gate_window;  /*!< W: MAC steps per window, in [0, 4096]; 0: the gate is off */
  int64_t gate_probe;   /*!< P: gated steps before a probe window, ≥ 1 */
  int64_t gate_margin;  /*!< μ ‰: off iff 1000·Σ bytes_mac ≥ μ·Σ bytes_full, [1, 10^4] */
  int64_t gate_min_hit; /*!< h_min ‰: off iff 1000·hits < h_min·Hq·W, in [0, 1000] */
  int64_t gate_fixed_bytes; /*!< B_fix: fixed bytes of a step in which the match runs, [0, 2^34] */
} macv_params;

/*! \brief Inputs of one step. Read-only for the plugin, except the ring tensors and gate_state. */
typedef struct macv_step_inputs {
  macv_tensor q;          /*!< [B, Hq, D] BF16: post-RoPE query of position m (attention) */
  macv_tensor q_tilde;    /*!< [B, Hq, D] BF16: q̃_m, the pre-RoPE query matched against the
                               ring (same strides as q) */
  macv_tensor k_cache;    /*!< BF16 post-RoPE keys, layout params.kv_layout; token t of request b
                               is at page page_table[b][t / page_size], row t % page_size. Tokens
                               beyond kv_len hold NaN */
  macv_tensor v_cache;    /*!< BF16 values, same layout as k_cache */
  macv_tensor page_table; /*!< [B, max_pages_per_request] I32; unused entries −1 */
  macv_tensor position;   /*!< [B] I64: m of each request (kv_len = m + 1, its own K/V cached) */
  macv_tensor
      ready; /*!< [B] U8: 1 ready (docs/semantics.md §3.2); 0: exact attention, no ring write */
  /* The ring (data NULL for a plain decode kernel, MACV_DECISIONS_EXACT). */
  macv_tensor ring_q;     /*!< [B, Hq, M, D] BF16 (in/out): q̃ of the position the slot holds */
  macv_tensor ring_o;     /*!< [B, Hq, M, D] caps.ring_o_dtype (in/out): state o over
                               [Fe(E(p)), E(p)) */
  macv_tensor ring_lse;   /*!< [B, Hq, M] F32 (in/out): state L (−inf: empty state) */
  macv_tensor ring_pos;   /*!< [B, Hq, M] I64 (in/out): position p the slot holds (−1: none);
                               slot p mod M. A candidate p of docs/semantics.md §3 step 1 is usable
                             only   if its slot holds p */
  macv_tensor ring_depth; /*!< [B, Hq, M] I32 (in/out), same strides as ring_lse: chain depth of
                               the entry the slot holds (semantics §3 Chains: 0 for a prompt
                               entry or a miss, depth(p) + 1 for a hit on p). Present (data not
                               NULL) only for a plugin declaring MACV_POLICY_DEPTH_CAP, which
                               then writes it with the entry */
  /* Appended after version 1's first layout (a plugin built before it never reads it). */
  macv_tensor gate_state; /*!< [B, 5] I64 (in/out): request b's mac::GateState as
                               (bytes_mac, bytes_full, hits, steps, off_left), zero when the case
                               starts. The step decides its gate mode from the row (gate_mode)
                               and leaves in it the state after the step (gate_update). Present
                               (data not NULL) only for a plugin declaring MACV_POLICY_GATE and a
                               case with gate_window > 0. The driver requires every row equal to
                               the reference's state after every step, and the rows of requests
                               that are not ready unchanged */
} macv_step_inputs;

/*! \brief Outputs of one step, allocated by the driver and poisoned before every call
 *  (floats NaN, hit 0xA5, match_pos and keys_read −2). */
typedef struct macv_step_outputs {
  macv_tensor o;         /*!< [B, Hq, D] caps.out_dtype: normalised output */
  macv_tensor lse;       /*!< [B, Hq] F32: output LSE (natural log unless caps.lse_base2) */
  macv_tensor hit;       /*!< [B, Hq] U8: 1 hit, 0 miss (the decisions are part of the
                              contract, docs/semantics.md §3.1); NULL unless caps.decisions is
                              MACV_DECISIONS_REPORTED */
  macv_tensor match_pos; /*!< [B, Hq] I64: matched p, −1 on a miss; NULL as hit */
  macv_tensor keys_read; /*!< [B, Hq] I64: KV tokens attended to (NULL unless
                              reports_keys_read) */
} macv_step_outputs;

/*! \brief Inputs of macv_prefill: the prompt entries of request b are positions
 *  first_pos[b] … first_pos[b] + count[b] − 1 (the last min(P_b, M) prompt positions; the
 *  cache holds keys [0, first_pos[b] + count[b])). */
typedef struct macv_prefill_inputs {
  macv_tensor q;          /*!< [B, N, Hq, D] BF16: post-RoPE queries of those positions, row j
                               of request b = position first_pos[b] + j (N = max count) */
  macv_tensor q_tilde;    /*!< [B, N, Hq, D] BF16: their pre-RoPE queries */
  macv_tensor first_pos;  /*!< [B] I64 */
  macv_tensor count;      /*!< [B] I64, 0 ≤ count[b] ≤ min(N, M) */
  macv_tensor k_cache;    /*!< as in macv_step_inputs */
  macv_tensor v_cache;    /*!< as in macv_step_inputs */
  macv_tensor page_table; /*!< as in macv_step_inputs */
  macv_tensor ring_q;     /*!< as in macv_step_inputs: slot p mod M of every prompt position
                               p gets (q̃_p, attn(q_p, [Fe(E(p)), E(p))), p) */
  macv_tensor ring_o;
  macv_tensor ring_lse;
  macv_tensor ring_pos;
  macv_tensor ring_depth; /*!< as in macv_step_inputs: prompt entries have depth 0 */
} macv_prefill_inputs;

typedef struct macv_handle macv_handle;

/*! \brief Returns MACV_ABI_VERSION of the header the plugin was built with. */
MACV_API int32_t macv_abi_version(void);
/*! \brief Fills *caps (the driver zeroes it and sets struct_size first). */
MACV_API int32_t macv_query(macv_caps* caps, char* err, size_t err_len);
/*! \brief Creates a handle for one case; `stream` is the cudaStream_t every later call of
 *  the case runs on for CUDA plugins (NULL on the CPU). */
MACV_API int32_t macv_create(const macv_params* params, void* stream, macv_handle** out, char* err,
                             size_t err_len);
/*! \brief Runs one decode step on `stream`; outputs and ring are complete when the stream is.
 *  Returns an error for anything it cannot run (a stride, a dtype, a CUDA error). */
MACV_API int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out,
                           void* stream, char* err, size_t err_len);
/*! \brief Frees the handle. */
MACV_API void macv_destroy(macv_handle* h);

/*! \brief Optional (caps.prefills): writes the prompt entries into the ring (docs/semantics.md §3
 *  Prefill). Called once per case, before the first step. */
MACV_API int32_t macv_prefill(macv_handle* h, const macv_prefill_inputs* in, void* stream,
                              char* err, size_t err_len);
/*! \brief Optional (caps.full_attention): exact attention attn(q_m, [0, m]) of every request
 *  and head into out->o and out->lse (hit, match_pos, keys_read are NULL); the ring is not
 *  touched. The driver calls it after a step, on that step's inputs. */
MACV_API int32_t macv_full_attention(macv_handle* h, const macv_step_inputs* in,
                                     macv_step_outputs* out, void* stream, char* err,
                                     size_t err_len);
/*! \brief Optional (caps.checks): reports a problem the plugin detected asynchronously (e.g.
 *  device error flags) since the last call; non-zero fails the case with the message. Called
 *  after the prefill and after every step, once the stream is idle, never inside a graph. */
MACV_API int32_t macv_check(macv_handle* h, void* stream, char* err, size_t err_len);

/*! \brief Function pointer types of the entry points, for loaders (dlsym). */
typedef int32_t (*macv_abi_version_fn)(void);
typedef int32_t (*macv_query_fn)(macv_caps*, char*, size_t);
typedef int32_t (*macv_create_fn)(const macv_params*, void*, macv_handle**, char*, size_t);
typedef int32_t (*macv_step_fn)(macv_handle*, const macv_step_inputs*, macv_step_outputs*, void*,
                                char*, size_t);
typedef void (*macv_destroy_fn)(macv_handle*);
typedef int32_t (*macv_prefill_fn)(macv_handle*, const macv_prefill_inputs*, void*, char*, size_t);
typedef int32_t (*macv_check_fn)(macv_handle*, void*, char*, size_t);

#ifdef __cplusplus
}
#endif
#endif /* MAC_VERIFY_PLUGIN_ABI_H */
