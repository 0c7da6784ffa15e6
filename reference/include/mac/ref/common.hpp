#pragma once
/*! \file common.hpp
 *  \brief Shared vocabulary of the MAC reference: parameters, error type, the
 *         range helpers E(p) and Fe(e) of DESIGN §3, and the hit threshold.
 */
#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mac {

using bf16 = Eigen::bfloat16;

/*! \brief Bad input: one clear message naming the offending value (DESIGN §7). */
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
  kProduction,  //!< BF16 `o`, FP32 `L`: the layout of the CUDA ring (DESIGN §4)
  kFull,        //!< the stepper's own precision: separates algorithmic from storage error
};

/*! \brief Which algebra builds the cache entry (DESIGN §3). */
enum class Variant {
  kSplit,     //!< entry = prefix ⊕ band; never subtracts
  kDowndate,  //!< the paper's form: entry = full ⊖ tail, full = (prefix ⊕ band ⊕ sinks) ⊕ tail
};

/*! \brief How prefill entries are built (DESIGN §3 "Prefill"). */
enum class PrefillMode {
  kDirect,    //!< attn(q_p, [Fe(E(p)), E(p))) directly
  kDowndate,  //!< full(q_p, [0, p]) ⊖ (sinks ⊕ window [E(p), p])
};

const char* to_string(StateStorage s);
const char* to_string(Variant v);
const char* to_string(PrefillMode m);
StateStorage parse_state_storage(const std::string& s);  //!< "production" | "full"
Variant parse_variant(const std::string& s);             //!< "split" | "downdate"
PrefillMode parse_prefill_mode(const std::string& s);    //!< "direct" | "downdate"

/*! \brief MAC parameters (DESIGN §3), with the spec's defaults. */
struct MacParams {
  double tau = 0.45;       //!< match margin τ; hit iff d2 < 2·D·(1−τ)²
  int64_t ring = 512;      //!< M, ring capacity (candidates per head)
  int64_t tail = 256;      //!< r, always-exact tail and rectification width
  int64_t sinks = 0;       //!< F, front sink tokens recomputed every step
  int64_t gen_min = 2048;  //!< minimum position m for a head to be eligible

  /*! \brief Throws InputError naming the first bad value (τ finite and < 1, M ≥ 1,
   *         r ≥ 0, F ≥ 0, gen_min ≥ 0). */
  void validate() const;
};

/*! \brief `E(p) = max(0, p + 1 − r)`: end (exclusive) of the cached prefix of position p. */
inline int64_t prefix_end(int64_t p, int64_t r) { return p + 1 - r > 0 ? p + 1 - r : 0; }

/*! \brief `Fe(e) = min(F, e)`: where a cached prefix ending at e starts. */
inline int64_t sink_end(int64_t F, int64_t e) { return F < e ? F : e; }

/*! \brief The hit threshold `thr = 2·D·(1 − τ)²` as the FP32 value every
 *         implementation compares against (computed in FP64, rounded once). */
inline float match_threshold(int64_t head_dim, double tau) {
  const double m = 1.0 - tau;
  return static_cast<float>(2.0 * static_cast<double>(head_dim) * m * m);
}

/*! \brief Supported head dimensions (DESIGN §4). */
inline bool supported_head_dim(int64_t d) { return d == 64 || d == 128 || d == 256; }

/*! \brief Natural-log LSE from a base-2 one (the one named conversion, DESIGN §4). */
template <typename T>
T lse_from_log2(T lse2) {
  return lse2 * static_cast<T>(0.693147180559945309417232121458176568L);
}
/*! \brief Base-2 LSE from a natural-log one. */
template <typename T>
T lse_to_log2(T lse) {
  return lse * static_cast<T>(1.442695040888963407359924681001892137L);
}

}  // namespace mac
