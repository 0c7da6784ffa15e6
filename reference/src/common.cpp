#include "mac/ref/common.hpp"

#include <cmath>

namespace mac {

const char* to_string(StateStorage s) {
  return s == StateStorage::kProduction ? "production" : "full";
}
const char* to_string(Variant v) { return v == Variant::kSplit ? "split" : "downdate"; }
const char* to_string(PrefillMode m) { return m == PrefillMode::kDirect ? "direct" : "downdate"; }

StateStorage parse_state_storage(const std::string& s) {
  if (s == "production") return StateStorage::kProduction;
  if (s == "full") return StateStorage::kFull;
  throw InputError(msg("state storage '", s, "' is not one of: production, full"));
}
Variant parse_variant(const std::string& s) {
  if (s == "split") return Variant::kSplit;
  if (s == "downdate") return Variant::kDowndate;
  throw InputError(msg("variant '", s, "' is not one of: split, downdate"));
}
PrefillMode parse_prefill_mode(const std::string& s) {
  if (s == "direct") return PrefillMode::kDirect;
  if (s == "downdate") return PrefillMode::kDowndate;
  throw InputError(msg("prefill mode '", s, "' is not one of: direct, downdate"));
}

const char* to_string(Precision p) { return p == Precision::kFp32 ? "fp32" : "fp64"; }
Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "fp64") return Precision::kFp64;
  throw InputError(msg("precision '", s, "' is not one of: fp32, fp64"));
}

void MacParams::validate() const {
  // τ < 1 keeps the threshold positive-margin; τ may be negative (a looser match).
  require(std::isfinite(tau) && tau < 1.0, "tau = ", tau, " must be finite and < 1");
  require(ring >= 1, "ring M = ", ring, " must be >= 1");
  require(tail >= 0, "tail r = ", tail, " must be >= 0");
  require(sinks >= 0, "sinks F = ", sinks, " must be >= 0");
  require(gen_min >= 0, "gen_min = ", gen_min, " must be >= 0");
  require(depth_cap >= -1, "depth_cap K = ", depth_cap, " must be >= -1 (-1: no cap)");
  require(refresh >= 0, "refresh N = ", refresh, " must be >= 0 (0: off)");
}

}  // namespace mac
