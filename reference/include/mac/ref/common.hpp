#pragma once
/*! \file common.hpp
 *  \brief The reference's parameters, error type and enums; the vocabulary of docs/semantics.md §3
 *         (E(p), Fe(e), the hit threshold, LSE base) is mac/semantics.hpp.
 */
#include <Eigen/Core>

#include "mac/ref/gate.hpp"
#include "mac/semantics.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mac {

using bf16 = Eigen::bfloat16;

/*! \brief Bad input: one clear message naming the offending value (docs/cli.md). */
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/*! \brief Builds a message from stream-able parts, e.g. `msg("tau = ", tau)`. */
template <typename... Args>
std::string msg(const Args&... args) {
  std::ostringstream os;
  os.precision(std::numeric_limits<double>::max_digits10);
  (os << ... << args);
  return os.str();
}

/*! \brief The shortest decimal form of `v` that reads back as the same double ("0.45",
 *  "1e+300", "1000"), for messages a person reads; msg() prints every digit. */
std::string shortest(double v);

/*! \brief Throws InputError(msg(args...)) unless `ok`. */
template <typename... Args>
void require(bool ok, const Args&... args) {
  if (!ok) throw InputError(msg(args...));
}

// ---------------------------------------------------------------------------------------
// Sizes from input. Every size computed from a file's dimensions or a flag is checked
// against a stated limit before anything is allocated, in int64 without overflow.
// ---------------------------------------------------------------------------------------

/*! \brief Most elements one array built from input sizes may hold: 2^36 (256 GiB as
 *  float32). More than the memory of any machine this code runs on (the largest GPU host
 *  has 560 GiB for several such arrays), so a larger declared size is a corrupt or hostile
 *  input, refused with a message instead of an allocation that aborts or an overflow. */
inline constexpr int64_t kMaxElements = int64_t{1} << 36;

/*! \brief The element limit in force for this process: kMaxElements unless lowered with
 *  set_max_elements (the fuzzers lower it, so that a small file declaring a huge sparse
 *  dataset cannot make them allocate gigabytes). */
int64_t max_elements();
/*! \brief Sets the element limit (1 ≤ n ≤ kMaxElements); returns the previous one. */
int64_t set_max_elements(int64_t n);

/*! \brief Most positions (tokens) of one layer: 2^31 − 1, so that a position fits the
 *  int32 `kv_len` of the CUDA kernels and of the file protocol. */
inline constexpr int64_t kMaxTokens = (int64_t{1} << 31) - 1;

/*! \brief Most query or KV heads of one layer: 2^16 (the largest models have 128). */
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;

/*! \brief Most layers of one trace: 2^16 (the largest models have about 128). */
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;

/*! \brief Most OpenMP threads a program accepts (`--threads`): more than any machine here
 *  has cores, and small enough that a typo cannot make the runtime start a million threads. */
inline constexpr int kMaxThreads = 1024;

/*! \brief The product of `sizes`, each of which must be ≥ 0; InputError naming `what`, the
 *  factors and the limit when the product exceeds `limit` (max_elements() when < 0),
 *  computed without overflow: a factor is compared with limit / product-so-far before it is
 *  multiplied in. */
int64_t checked_product(const std::string& what, std::initializer_list<int64_t> sizes,
                        int64_t limit = -1);

/*! \brief How a cached ring state is held. */
enum class StateStorage {
  kProduction,  //!< BF16 `o`, FP32 `L`: the layout of the CUDA ring (docs/semantics.md §4)
  kFull,        //!< the stepper's own precision: separates algorithmic from storage error
};

/*! \brief Which algebra builds the cache entry (docs/semantics.md §3). */
enum class Variant {
  kSplit,     //!< entry = prefix ⊕ band; never subtracts
  kDowndate,  //!< the paper's form: entry = full ⊖ tail, full = (prefix ⊕ band ⊕ sinks) ⊕ tail
};

/*! \brief How prefill entries are built (docs/semantics.md §3 "Prefill"). */
enum class PrefillMode {
  kDirect,    //!< attn(q_p, [Fe(E(p)), E(p))) directly
  kDowndate,  //!< full(q_p, [0, p]) ⊖ (sinks ⊕ window [E(p), p])
};

/*! \brief Arithmetic precision of the decode stepper: DecodeStepper<float> or <double>. */
enum class Precision { kFp32, kFp64 };

const char* to_string(StateStorage s);
const char* to_string(Variant v);
const char* to_string(PrefillMode m);
StateStorage parse_state_storage(const std::string& s);  //!< "production" | "full"
Variant parse_variant(const std::string& s);             //!< "split" | "downdate"
PrefillMode parse_prefill_mode(const std::string& s);    //!< "direct" | "downdate"
const char* to_string(Precision p);
Precision parse_precision(const std::string& s);  //!< "fp32" | "fp64"

/*! \brief MAC parameters (docs/semantics.md §3), with the spec's defaults. */
struct MacParams {
  double tau = 0.45;       //!< match margin τ in [0, 1); hit iff d2 < 2·D·(1−τ)²
  int64_t ring = 512;      //!< M, ring capacity (candidates per head), in [1, kMaxTokens]
  int64_t tail = 256;      //!< r, always-exact tail and rectification width
  int64_t sinks = 0;       //!< F, front sink tokens recomputed every step
  int64_t gen_min = 2048;  //!< minimum position m for a head to be eligible
  // Policies that bound chains of reuse (docs/semantics.md §3.3): each turns a would-be hit
  // into a miss of §3 (exact attention, exact entry written when ready).
  int64_t depth_cap = -1;  //!< K: a hit on an entry of chain depth ≥ K misses; −1: no cap
  int64_t refresh = 0;     //!< N: head h misses at every m with refresh_due(m, h, Hq, N); 0: off
  // The adaptive gate (docs/semantics.md §3.5, mac/ref/gate.hpp): per request and layer, the
  // match stops while a window of W steps shows that MAC does not pay in the byte model.
  int64_t gate_window = 0;   //!< W: MAC steps per window, in [0, 4096]; 0: the gate is off
  int64_t gate_probe = 256;  //!< P: gated steps before a probe window, in [1, kMaxTokens]
  int64_t gate_margin = 1000;  //!< μ ‰: off iff 1000·Σ bytes_mac ≥ μ·Σ bytes_full, [1, 10^4]
  int64_t gate_min_hit = 0;  //!< h_min ‰: off iff 1000·hits < h_min·Hq·W, in [0, 1000]
  int64_t gate_fixed_bytes = kGateFixedBytesDefault;  //!< B_fix, in [0, 2^34]

  /*! \brief Throws InputError naming the first bad value and its range: τ in [0, 1),
   *         M in [1, kMaxTokens], r, F and gen_min in [0, kMaxTokens], depth_cap ≥ −1,
   *         refresh ≥ 0, and the gate's parameters in the ranges above. */
  void validate() const;
};

/*! \brief Everything that configures one run of the decode stepper over a layer: the
 *  arguments of DecodeStepper<T>'s constructor, its precision T and its prefill(P, mode).
 *  The run dump (mac/io/trace_io.hpp) records exactly this. */
struct StepperConfig {
  MacParams params;
  Variant variant = Variant::kSplit;
  StateStorage storage = StateStorage::kProduction;
  PrefillMode prefill_mode = PrefillMode::kDirect;
  Precision precision = Precision::kFp32;
  int64_t prefill = 0;  //!< P: positions < P are prompt
};

}  // namespace mac
