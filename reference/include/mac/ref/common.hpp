#pragma once
/*! \file common.hpp
 *  \brief The reference's parameters, error type and enums; the vocabulary of docs/semantics.md §3
 *         (E(p), Fe(e), the hit threshold, LSE base) is mac/semantics.hpp.
 */
#include <Eigen/Core>

#include "mac/semantics.hpp"

#include <cmath>
#include <cstdint>
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

/*! \brief Throws InputError(msg(args...)) unless `ok`. */
template <typename... Args>
void require(bool ok, const Args&... args) {
  if (!ok) throw InputError(msg(args...));
}

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
  double tau = 0.45;       //!< match margin τ; hit iff d2 < 2·D·(1−τ)²
  int64_t ring = 512;      //!< M, ring capacity (candidates per head)
  int64_t tail = 256;      //!< r, always-exact tail and rectification width
  int64_t sinks = 0;       //!< F, front sink tokens recomputed every step
  int64_t gen_min = 2048;  //!< minimum position m for a head to be eligible
  // Policies that bound chains of reuse (DESIGN semantics §3.3): each turns a would-be hit
  // into a miss of §3 (exact attention, exact entry written when ready).
  int64_t depth_cap = -1;  //!< K: a hit on an entry of chain depth ≥ K misses; −1: no cap
  int64_t refresh = 0;     //!< N: head h misses at every m with refresh_due(m, h, Hq, N); 0: off

  /*! \brief Throws InputError naming the first bad value (τ finite and < 1, M ≥ 1,
   *         r ≥ 0, F ≥ 0, gen_min ≥ 0, depth_cap ≥ −1, refresh ≥ 0). */
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
