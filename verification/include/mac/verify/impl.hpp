#pragma once
/*! \file impl.hpp
 *  \brief The "implementation under test" interface of the driver, and the CPU
 *         implementations: the FP32 reference stepper, and an independent FP64 model of
 *         docs/semantics.md §3 with switchable planted faults (the proof that the matrix catches
 * them). The CUDA implementation is in cuda_impl.hpp.
 */
#include "mac/ref/gate.hpp"
#include "mac/verify/inputs.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mac::verify {

/*! \brief What an implementation reports for one (request, query head) of one step. */
struct HeadOutput {
  bool decision_reported = true;  //!< false: hit and match_pos are not the implementation's
  bool hit = false;
  int64_t match_pos = -1;  //!< −1 on a miss
  int64_t keys_read = -1;  //!< KV tokens attended to (−1: not reported)
  std::vector<double> o;   //!< [D] normalised output
  double lse = 0;          //!< natural-log LSE of the output
  // Ring entry of position m after the step (slot m mod M); `entry_valid` false when the
  // implementation cannot expose it.
  bool entry_valid = false;
  bool entry_q_exact = true;    //!< the stored q̃ is a bit copy of q̃_m
  bool entry_written = false;   //!< slot m mod M now holds position m (or changed, on a GPU)
  std::vector<double> entry_o;  //!< [D]
  double entry_lse = 0;
  int64_t entry_depth = -1;  //!< chain depth stored with entry(m) (−1: not reported)
  // Full-attention comparison for ineligible heads (GPU): −1 not checked, 0 differs, 1 same.
  int full_bit_identical = -1;
};

/*! \brief One step of all requests: [batch][Hq]. */
using StepOutput = std::vector<std::vector<HeadOutput>>;

/*! \brief The fields of mac::GateState in the order of the ABI's gate_state tensor. */
inline constexpr const char* kGateStateFields[5] = {"bytes_mac", "bytes_full", "hits", "steps",
                                                    "off_left"};
/*! \brief A gate state as the ABI's gate_state row: its fields in kGateStateFields order. */
inline std::array<int64_t, 5> gate_state_row(const GateState& s) {
  return {s.bytes_mac, s.bytes_full, s.hits, s.steps, s.off_left};
}

/*! \brief The implementation under test. The driver calls begin() once per case (prefill
 *  of every request: ring entries of the last M prompt positions), then step(s) for
 *  s = 0 … steps−1 (request i decodes m = P_i + s), then end(). */
class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;
  virtual std::string device() const = 0;
  /*! \brief False if this implementation cannot run the case (reason in *why). */
  virtual bool supports(const CaseSpec& c, std::string* why) const { return true; }
  virtual void begin(const CaseInputs& in) = 0;
  virtual void step(int64_t s, StepOutput* out) = 0;
  /*! \brief Request i's gate state (semantics §3.5) after the last step, where the
   *  implementation keeps one the driver can see, as (bytes_mac, bytes_full, hits, steps,
   *  off_left) in 64 bits each (a value outside int32 is seen, not narrowed); false: none to
   *  check. The driver requires it equal, field by field, to the expected state every step. */
  virtual bool gate_state(int i, std::array<int64_t, 5>* out) const { return false; }
  /*! \brief Finishes the case; returns a non-empty message on an implementation-level error
   *  (e.g. device error flags). */
  virtual std::string end() { return {}; }
};

/*! \brief The FP32 reference (mac::ref::DecodeStepper<float>, split variant, FP32 storage:
 *  so the comparison with the FP64 oracle measures the algorithm's rounding, not BF16
 *  storage). */
std::unique_ptr<Implementation> make_reference_impl(StateStorage storage = StateStorage::kFull);

/*! \brief Faults that can be planted in the model implementation. */
enum class Fault {
  kNone,
  kTieNewer,            //!< ties go to the newer candidate
  kBandLate,            //!< hit band starts one token late: [E(p)+1, E(m))
  kThresholdInclusive,  //!< hit iff d2 <= thr (not strict)
  kWriteBeforeRead,     //!< writes entry(m) before matching (destroys candidate m−M)
  kNoReadyGate,         //!< not-ready requests still match and write
  kSecondBest,          //!< on an unusable nearest entry, searches for another candidate
  kTailShort,           //!< tail misses the current token's key: [E(m), m)
  kDowndateEntry,       //!< stores entry(m) as out ⊖ (sink ⊕ tail) in FP32 (cancels)
  kGenMinOffByOne,      //!< eligible iff m > gen_min
  kCapOffByOne,         //!< depth cap: a hit on depth K is allowed (misses only above K)
  kRefreshAllHeads,     //!< refresh without the stagger: every head at m mod N = 0
  kForcedMissChains,    //!< a policy-forced miss writes depth(p) + 1, not 0 (never resets)
};
const char* to_string(Fault f);
Fault parse_fault(const std::string& s);  //!< "none", "tie-newer", "band-late", ...
std::vector<Fault> all_faults();          //!< every fault except kNone

/*! \brief An independent implementation of docs/semantics.md §3 (FP64 partial attention of the
 *  reference's `attend`, FP64 ring), with one planted fault. */
std::unique_ptr<Implementation> make_model_impl(Fault fault);

}  // namespace mac::verify
