#include "mac/ref/common.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

std::string shortest(double v) {
  char buf[40];
  if (std::abs(v) < 1e9 && v == std::floor(v)) {  // 1000, not 1e+03
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

namespace {
std::atomic<int64_t> g_max_elements{kMaxElements};
}  // namespace

int64_t max_elements() { return g_max_elements.load(); }

int64_t set_max_elements(int64_t n) {
  require(n >= 1 && n <= kMaxElements, "element limit ", n, " must be >= 1 and <= ", kMaxElements);
  return g_max_elements.exchange(n);
}

int64_t checked_product(const std::string& what, std::initializer_list<int64_t> sizes,
                        int64_t limit) {
  if (limit < 0) limit = max_elements();
  int64_t n = 1;
  for (const int64_t s : sizes) require(s >= 0, what, ": size ", s, " is negative");
  for (const int64_t s : sizes) {
    if (s != 0 && n > limit / s) {
      std::string factors;
      for (const int64_t f : sizes) factors += (factors.empty() ? "" : " x ") + std::to_string(f);
      throw InputError(msg(what, ": ", factors, " elements exceed the limit of ", limit));
    }
    n *= s;
  }
  return n;
}

void MacParams::validate() const {
  // τ in [0, 1). The threshold 2·D·(1−τ)² is the squared distance of two unrelated queries
  // (2·D, the Gaussian null model of docs/semantics.md §3) shrunk by the margin: τ < 0 would make
  // it larger than the null-model distance, so that unrelated queries hit and nearly every step
  // reuses; τ = 1 makes it 0, so that nothing hits (d2 < 0 never holds).
  require(std::isfinite(tau) && tau >= 0.0 && tau < 1.0, "tau = ", shortest(tau),
          " must be finite and < 1, and >= 0: the match margin is in [0, 1) (a negative tau "
          "makes unrelated queries hit)");
  require(ring >= 1 && ring <= kMaxTokens, "ring M = ", ring, " must be >= 1 and <= ", kMaxTokens);
  require(tail >= 0 && tail <= kMaxTokens, "tail r = ", tail, " must be >= 0 and <= ", kMaxTokens);
  require(sinks >= 0 && sinks <= kMaxTokens, "sinks F = ", sinks,
          " must be >= 0 and <= ", kMaxTokens);
  require(gen_min >= 0 && gen_min <= kMaxTokens, "gen_min = ", gen_min,
          " must be >= 0 and <= ", kMaxTokens);
  require(depth_cap >= -1 && depth_cap <= kMaxTokens, "depth_cap K = ", depth_cap,
          " must be >= -1 and <= ", kMaxTokens, " (-1: no cap)");
  require(refresh >= 0 && refresh <= kMaxTokens, "refresh N = ", refresh,
          " must be >= 0 and <= ", kMaxTokens, " (0: off)");
  require(gate_window >= 0 && gate_window <= kGateMaxWindow, "gate_window W = ", gate_window,
          " must be >= 0 and <= ", kGateMaxWindow, " (0: the gate is off)");
  require(gate_probe >= 1 && gate_probe <= kMaxTokens, "gate_probe P = ", gate_probe,
          " must be >= 1 and <= ", kMaxTokens);
  require(gate_margin >= 1 && gate_margin <= kGateMaxMargin, "gate_margin = ", gate_margin,
          " must be >= 1 and <= ", kGateMaxMargin, " (per mille of full attention's bytes)");
  require(gate_min_hit >= 0 && gate_min_hit <= kGatePerMille, "gate_min_hit = ", gate_min_hit,
          " must be >= 0 and <= ", kGatePerMille, " (per mille of head-steps)");
  require(gate_fixed_bytes >= 0 && gate_fixed_bytes <= kGateMaxFixedBytes,
          "gate_fixed_bytes = ", gate_fixed_bytes, " must be >= 0 and <= ", kGateMaxFixedBytes);
}

}  // namespace mac
