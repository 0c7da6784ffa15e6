#pragma once
/*! \file runner.hpp
 *  \brief GPU case runner (namespace mac::cuda::runner): the host code that packs a decode
 *         case into the layouts of DecodeParams, uploads it, runs steps and reads them back,
 *         shared by the GPU suite (tests/cuda), verification's CUDA implementation and
 *         mac-bench. Plain C++ on the public mac_cuda API: no CUDA types appear here, and
 *         without CUDA every call returns what the stub returns (StatusCode::kNoCuda).
 *
 *  Layouts (every array as DecodeParams documents it; bf16 = raw bits of BF16-exact floats):
 *   - KV pools: NHD, [num_pages, page_size, Hkv, D] bf16 each, K and V separate.
 *   - Page table: [N, max_pages_per_row] int32; entry j of row i holds keys
 *     [j·ps, (j+1)·ps) of row i. CaseRunner: the pages of all rows, 0 … P−1, permuted by the
 *     layout's shuffle and handed out row after row; page P is a spare page every unused entry
 *     points to. Tokens nobody wrote hold NaN (0x7fc0), so a read of one shows in the output.
 *   - Rings: [R, M, Hq, D] bf16 q̃ and o, [R, M, Hq] fp32 natural-log L; position p of the
 *     request in slot s is entry (s·M + p mod M)·Hq + h. CaseRunner starts them empty
 *     (L = −inf, q̃ and o zero).
 *   - Readiness: [R] int32 ready, epoch_a, epoch_b; a slot is ready iff ready ≠ 0 and
 *     epoch_a == epoch_b.
 */
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda::runner {

/*! \brief Raw bits of the BF16-exact float `x` (its upper 16 bits). */
uint16_t bf16_bits(float x);
/*! \brief Float value of raw BF16 bits. */
float bf16_value(uint16_t bits);

/*! \brief Element offset of token `t`, KV head 0, of row `row` in an NHD pool of
 *  `num_kv_heads`·`head_dim` elements per token, through a host copy of the page table. */
size_t kv_offset(const std::vector<int32_t>& page_table, int max_pages_per_row, int page_size,
                 int num_kv_heads, int head_dim, int row, int64_t t);

/*! \brief Element offset of ring entry (slot, position `pos`, head 0) in a [R, M, Hq] ring
 *  (multiply by D for the q̃ and o arrays). */
size_t ring_entry(int slot, int64_t pos, int ring, int num_q_heads);

/*! \brief Page table [rows, pages_per_row] in which each row's pages are one contiguous run:
 *  `packed` false: row i owns pages [i·pages_per_row, (i+1)·pages_per_row); true: the first
 *  `pages_needed` entries of row i are pages [i·pages_needed, (i+1)·pages_needed) (each row's
 *  pages follow the previous row's), the rest as unpacked. */
std::vector<int32_t> contiguous_page_table(int rows, int pages_per_row, int pages_needed,
                                           bool packed);

/*! \brief Uploads the request slot of each row ([N] int32 into `b.slot`) and the readiness
 *  arrays ([R] int32 each into `b.ready`, `b.epoch_a`, `b.epoch_b`) on `stream`
 *  (asynchronous: the host vectors must live until the stream has run the copies). */
Status upload_slots_and_readiness(StepBuffers& b, const std::vector<int32_t>& slots,
                                  const std::vector<int32_t>& ready,
                                  const std::vector<int32_t>& epoch_a,
                                  const std::vector<int32_t>& epoch_b, void* stream);

/*! \brief Device copy of one ring position of `rows` consecutive request slots
 *  (first_slot, first_slot + 1, …): q̃ and o [rows, Hq, D] bf16, L [rows, Hq] fp32. save()
 *  copies the ring's entries of position `pos` into it, restore() writes them back: a
 *  benchmark replays a step that overwrites the entry of m without changing what the next
 *  replay sees. Both are asynchronous on `stream`. */
class RingPositionCopy {
 public:
  /*! \brief Allocates room for `rows` slots of `num_q_heads`·`head_dim`. */
  Status allocate(int rows, int num_q_heads, int head_dim);
  Status save(const DecodeParams& p, int first_slot, int rows, int64_t pos, void* stream);
  Status restore(const DecodeParams& p, int first_slot, int rows, int64_t pos, void* stream);

 private:
  Status copy(const DecodeParams& p, int first_slot, int rows, int64_t pos, bool to_ring,
              void* stream);
  int hq_ = 0, d_ = 0;
  DeviceBuffer q_, o_, l_;
};

/*! \brief Token streams of one request: BF16-exact floats, row-major, `tokens` positions. */
struct RequestStreams {
  int64_t tokens = 0;             //!< T: positions with data; the pages are sized for T keys
  int64_t prompt = 0;             //!< P ≤ T: keys in the cache before the first step
  const float* k = nullptr;       //!< [T, Hkv, D] post-RoPE keys (host)
  const float* v = nullptr;       //!< [T, Hkv, D] values (host)
  const float* q_pre = nullptr;   //!< [T, Hq, D] pre-RoPE queries (host)
  const float* q_post = nullptr;  //!< [T, Hq, D] post-RoPE queries (host)
};

/*! \brief A case: sizes, the requests' streams, where they live and the step's scalars. */
struct CaseLayout {
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 128, page_size = 16, ring = 64;
  std::vector<RequestStreams> requests;          //!< N rows, row i = request i
  int num_slots = 1;                             //!< R
  std::vector<int32_t> slots;                    //!< [N] request slot of each row, distinct, < R
  std::vector<int32_t> ready, epoch_a, epoch_b;  //!< [R] readiness (see the file comment)
  /*! Permutes the page ids 0 … P−1 before they are handed out (seeded by the caller);
   *  empty: in order. */
  std::function<void(std::vector<int32_t>&)> shuffle_pages;
  // DecodeParams's scalars of every step.
  float softmax_scale = 0;
  double tau = 0.45;
  int tail = 0, sinks = 0, gen_min = 0;
};

/*! \brief One step read back: [N, Hq, D] bf16 outputs and [N, Hq] LSE (natural log) of the
 *  MAC engine and of full attention on the same inputs, and the MAC step's diagnostics. */
struct StepReadback {
  std::vector<uint16_t> out, out_full;
  std::vector<float> lse, lse_full, d2;
  std::vector<int8_t> hit;
  std::vector<int64_t> match_pos;
  std::vector<int32_t> keys_read;
};

/*! \brief Ring entries of one request slot: q̃ and o [positions, Hq, D] bf16, L [positions, Hq]
 *  fp32 (one position, or the whole ring). */
struct RingSlot {
  std::vector<uint16_t> q_pre, o;
  std::vector<float> lse;
};

/*! \brief Packs a CaseLayout into StepBuffers (the prompt's K/V in the shuffled pool, empty
 *  rings, slots, readiness), creates a MAC engine and a full-attention engine, and runs
 *  prefill, steps and read-backs. Every copy and kernel runs on one stream it owns, in
 *  order. Positions go in through upload_step(); row i's key of position m must be uploaded
 *  before a step that reads it. */
class CaseRunner {
 public:
  /*! \brief Checks the layout's sizes, packs and uploads it, and creates the engines from
   *  `mac` (the engine under test) and `full` (the one full_attention() runs on). */
  static Status create(const CaseLayout& layout, const EngineConfig& mac, const EngineConfig& full,
                       std::unique_ptr<CaseRunner>* out);
  ~CaseRunner();
  CaseRunner(const CaseRunner&) = delete;
  CaseRunner& operator=(const CaseRunner&) = delete;

  /*! \brief Ring entries (Engine::prefill_entries) of rows [first_row, first_row + rows) in
   *  one call: row first_row + j gets positions first_pos[j] … first_pos[j] + num_positions
   *  − 1, its queries packed as [rows, num_positions, Hq, D]. Synchronous. */
  Status prefill(int first_row, int rows, int num_positions, const std::vector<int64_t>& first_pos);
  /*! \brief Uploads position pos[i] of every row i: its K/V token into its page, q_post and
   *  q_pre of that position, kv_len = pos[i] + 1. Synchronous. */
  Status upload_step(const std::vector<int64_t>& pos);
  /*! \brief One MAC step: eager (Engine::mac_step), or from a graph captured at the first
   *  graph step and replayed at every one. Asynchronous. */
  Status mac_step(bool graph);
  /*! \brief Full attention of the full engine on the same inputs into its own outputs (no
   *  diagnostics). Asynchronous. */
  Status full_attention();
  /*! \brief Waits for the stream and reads both engines' outputs and the diagnostics. */
  Status read_step(StepReadback* r);
  /*! \brief Reads position `pos` of row `row`'s ring slot (synchronous). */
  Status read_ring_slot(int row, int64_t pos, RingSlot* s);
  /*! \brief Reads the whole ring of row `row`'s request slot: q̃ and o [M, Hq, D], L [M, Hq],
   *  entry j at slot position j (synchronous). */
  Status read_ring(int row, RingSlot* s);

  /*! \brief DecodeParams over the case's arrays with the layout's scalars. */
  DecodeParams params() const;
  Engine& engine() { return *engine_; }
  Engine& full_engine() { return *engine_full_; }
  StepBuffers& buffers() { return b_; }
  void* stream() const { return stream_; }
  const CaseLayout& layout() const { return c_; }
  int batch() const { return static_cast<int>(c_.requests.size()); }

 private:
  CaseRunner() = default;
  Status pack();
  size_t kv_index(int row, int64_t t) const;
  Status read_ring_positions(int row, int64_t pos, int count, RingSlot* s);

  CaseLayout c_;
  int max_pages_ = 0;
  int64_t num_pages_ = 0;
  std::vector<int32_t> page_table_;
  std::vector<uint16_t> k_host_, v_host_;  //!< host mirror of the pools
  StepBuffers b_;                          //!< the step's arrays (MAC engine's outputs)
  DeviceBuffer out_full_, lse_full_;       //!< the full-attention engine's outputs
  std::unique_ptr<Engine> engine_, engine_full_;
  void* stream_ = nullptr;
  bool captured_ = false;
  // Host staging of upload_step and prefill; kept alive until the stream has copied them.
  std::vector<uint16_t> q_post_host_, q_pre_host_;
  std::vector<int32_t> len_host_;
};

}  // namespace mac::cuda::runner
