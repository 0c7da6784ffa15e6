// libFuzzer target: the case-matrix parser of mac-verify --matrix (parse_matrix,
// verification/src/case.cpp); the input is the matrix file. Every case accepted must print
// as a line that parses back to the same line, and its sizes and costs must be computable;
// a bad file must be refused with mac::InputError. docs/fuzzing.md.
#include "mac/verify/case.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<mac::verify::CaseSpec> cases;
  try {
    cases = mac::verify::parse_matrix(text);
  } catch (const mac::InputError& e) {
    if (std::getenv("MAC_FUZZ_VERBOSE")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  // Outside the try: an accepted case whose line (as a report stores it) does not parse
  // back to itself is a finding.
  for (const auto& c : cases) {
    const std::string line = c.to_line();
    if (mac::verify::parse_case(line).to_line() != line) __builtin_trap();
    (void)c.max_kv_len();
    (void)c.cost_reference();
    (void)c.cost_expected();
    (void)c.logit_scale();
    (void)c.describe();
  }
  return 0;
}
