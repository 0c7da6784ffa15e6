#ifndef MAC_VERIFY_PLUGIN_ABI_H
#define MAC_VERIFY_PLUGIN_ABI_H
/*! \file plugin_abi.h
 *  \brief The C ABI of an implementation under test ("plugin") of mac-verify, version 1.
 *
 *  C99, no C++ types: a plugin is a shared object exporting the five functions declared
 *  below (macv_abi_version, macv_query, macv_create, macv_step, macv_destroy). The driver
 *  loads it in a child process, so a crash or a hang costs one case, not the run.
 *
 *  One decode step of DESIGN §3 for a batch of B requests of one layer shape
 *  (D, Hq = G·Hkv). The driver owns every buffer: the KV cache (paged), the page table, the
 *  ring (q̃, o, L, position per slot) and the outputs (destination passing). The plugin
 *  reads the inputs, reads and writes ring slot `m mod M` of each ready request, and writes
 *  the outputs; it keeps no case state it could answer from. The driver fills every output
 *  with NaN before each call, hashes every input before and after, and requires every ring
 *  slot the plugin did not declare it writes to be bit-identical after the call.
 *
 *  Tensors are described like DLPack: data pointer, dtype code, rank, shape and strides in
 *  elements (not bytes), device. The driver may choose any strides; a plugin honours them or
 *  rejects the call with an error naming the tensor.
 *
 *  LSE is the natural log (DESIGN §4). A plugin that works in base 2 may say so in its
 *  capabilities (`lse_base2`); the driver then converts its output and ring L, and gives
 *  it the ring L in base 2.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief The ABI version this header describes; macv_abi_version() returns it. */
#define MACV_ABI_VERSION 1

/*! \brief Element types. */
enum macv_dtype {
  MACV_F32 = 0,
  MACV_BF16 = 1, /*!< IEEE bfloat16 bits (uint16) */
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

/*! \brief What a plugin can run. A list with count 0 means "any value". Cases outside these
 *  limits are reported NOT APPLICABLE, counted apart, never as passed. */
typedef struct macv_caps {
  uint32_t struct_size; /*!< sizeof(macv_caps), set by the driver before the call */
  char name[64];        /*!< declared implementation name */
  char version[32];     /*!< declared implementation version */
  int32_t device;       /*!< enum macv_device the plugin's tensors must live on */
  int32_t head_dims[8]; /*!< supported D */
  int32_t num_head_dims;
  int32_t gqa_ratios[16]; /*!< supported G = Hq / Hkv */
  int32_t num_gqa_ratios;
  int32_t page_sizes[8];
  int32_t num_page_sizes;
  int32_t kv_layouts;         /*!< bit mask of enum macv_kv_layout */
  int32_t sinks;              /*!< 1: supports F > 0 */
  int64_t max_context;        /*!< largest kv_len (0: no limit) */
  int64_t ring_min, ring_max; /*!< supported M (0: no limit) */
  int32_t out_dtype;          /*!< dtype of o it writes: MACV_F32 or MACV_BF16 */
  int32_t ring_o_dtype;       /*!< dtype of ring o: MACV_F32 or MACV_BF16 (DESIGN §4 production) */
  int32_t lse_base2;          /*!< 1: lse and ring L are base 2 (the driver converts) */
  int32_t reports_decisions;  /*!< writes hit and match_pos */
  int32_t reports_keys_read;  /*!< writes keys_read */
  int32_t writes_ring;        /*!< writes ring slot m mod M of ready requests (DESIGN §3 step 4) */
  int32_t graph_capturable;   /*!< macv_step may be captured in a CUDA graph on `stream` */
} macv_caps;

/*! \brief Parameters of one case, fixed for the handle's life. */
typedef struct macv_params {
  int32_t head_dim, num_q_heads, num_kv_heads, batch; /*!< D, Hq, Hkv, B */
  int32_t page_size, kv_layout, num_pages, max_pages_per_request;
  int64_t ring, tail, sinks, gen_min; /*!< M, r, F, gen_min */
  double tau;
  float threshold;      /*!< thr = 2·D·(1 − τ)² rounded once to FP32; hit iff d2 < thr */
  double softmax_scale; /*!< s in exp(s·q·k) */
  int64_t max_context;  /*!< largest kv_len of the case */
} macv_params;

/*! \brief Inputs of one step (read-only for the plugin except the ring). */
typedef struct macv_step_inputs {
  macv_tensor q;          /*!< [B, Hq, D] BF16: post-RoPE query of position m (attention) */
  macv_tensor q_tilde;    /*!< [B, Hq, D] BF16: q̃_m, the pre-RoPE query used for matching */
  macv_tensor k_cache;    /*!< BF16, layout per params.kv_layout; token t of request b is at
                               page page_table[b][t / page_size], row t % page_size */
  macv_tensor v_cache;    /*!< BF16, same layout as k_cache */
  macv_tensor page_table; /*!< [B, max_pages_per_request] I32 */
  macv_tensor position;   /*!< [B] I64: m of each request (kv_len = m + 1, its own K/V cached) */
  macv_tensor ready;      /*!< [B] U8: 1 ready (DESIGN §3.2); 0: exact attention, no ring write */
  macv_tensor ring_q;     /*!< [B, Hq, M, D] BF16: q̃ of the slot's position (in/out) */
  macv_tensor ring_o;     /*!< [B, Hq, M, D] caps.ring_o_dtype: state o over [Fe(E(p)), E(p)) */
  macv_tensor ring_lse;   /*!< [B, Hq, M] F32: state L (−inf: empty state) */
  macv_tensor ring_pos;   /*!< [B, Hq, M] I64: position p the slot holds (−1: none) */
} macv_step_inputs;

/*! \brief Outputs of one step, allocated by the driver and NaN-filled before the call. */
typedef struct macv_step_outputs {
  macv_tensor o;         /*!< [B, Hq, D] caps.out_dtype: normalised output */
  macv_tensor lse;       /*!< [B, Hq] F32: output LSE */
  macv_tensor hit;       /*!< [B, Hq] U8 (data NULL unless reports_decisions) */
  macv_tensor match_pos; /*!< [B, Hq] I64, −1 on a miss (data NULL unless reports_decisions) */
  macv_tensor keys_read; /*!< [B, Hq] I64 (data NULL unless reports_keys_read) */
} macv_step_outputs;

typedef struct macv_handle macv_handle;

/*! \brief Returns MACV_ABI_VERSION of the header the plugin was built with. */
int32_t macv_abi_version(void);
/*! \brief Fills *caps; returns 0, or non-zero with a message in err[err_len]. */
int32_t macv_query(macv_caps* caps, char* err, size_t err_len);
/*! \brief Creates a handle for one case; `stream` is a cudaStream_t for CUDA plugins (NULL
 *  on the CPU). Returns 0, or non-zero with a message in err. */
int32_t macv_create(const macv_params* params, void* stream, macv_handle** out, char* err,
                    size_t err_len);
/*! \brief Runs one decode step on `stream`; outputs are complete when the stream is. */
int32_t macv_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out, void* stream,
                  char* err, size_t err_len);
void macv_destroy(macv_handle* h);

#ifdef __cplusplus
}
#endif
#endif /* MAC_VERIFY_PLUGIN_ABI_H */
