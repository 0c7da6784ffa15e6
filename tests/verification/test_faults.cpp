// The planted-fault proof: the driver's case-checking code (run_case) run on deliberately
// wrong implementations catches every fault in the cases designed for it, while the same
// implementation without a fault passes them all.
//
// Implementation under test: mac::verify::make_model_impl(fault), an independent FP64
// implementation of docs/semantics.md §3 with one planted fault (impl.hpp lists them).
#include <boost/test/unit_test.hpp>

#include "mac/verify/check.hpp"

#include <map>
#include <set>

using namespace mac;
using namespace mac::verify;

namespace {

struct Expectation {
  Fault fault;
  std::vector<int> cases;  //!< matrix ids that must FAIL with this fault
  const char* what;        //!< the kind of check that must report it
};

// Ids chosen from the smoke subset (cheap); each list names cases whose design targets the
// fault (family in the comment). What each fault breaks:
const std::vector<Expectation>& expectations();

CaseResult run(int id, Fault f) {
  auto impl = make_model_impl(f);
  RunOptions opt;
  opt.tol = Tolerances::cpu();
  opt.keep_steps_on_failure = false;
  return run_case(builtin_matrix()[static_cast<size_t>(id)], *impl, opt);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(planted_faults)

BOOST_AUTO_TEST_CASE(fault_free_model_passes_the_targeted_cases) {
  std::set<int> ids;
  for (const auto& e : expectations()) ids.insert(e.cases.begin(), e.cases.end());
  for (int id : ids) {
    const auto r = run(id, Fault::kNone);
    BOOST_TEST((r.status == CaseStatus::kPass), "case " << id << ": " << r.message);
  }
}

BOOST_AUTO_TEST_CASE(every_fault_is_caught) {
  for (const auto& e : expectations()) {
    for (int id : e.cases) {
      const auto r = run(id, e.fault);
      BOOST_TEST_MESSAGE(to_string(e.fault) << " on case " << id << " ["
                                            << builtin_matrix()[static_cast<size_t>(id)].family
                                            << "]: " << to_string(r.status) << ": " << r.message);
      BOOST_TEST((r.status == CaseStatus::kFail), to_string(e.fault)
                                                      << " not caught by case " << id);
      BOOST_TEST(r.message.find(e.what) != std::string::npos,
                 to_string(e.fault) << " on case " << id << " reported '" << r.message
                                    << "', expected a '" << e.what << "' failure");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
const std::vector<Expectation>& expectations() {
  static const std::vector<Expectation> e = {
      // tie family: twin candidates at equal distance; the older must win.
      {Fault::kTieNewer, {404, 407}, "decision"},
      // grid: any hit's band [E(p), E(m)) loses its first key.
      {Fault::kBandLate, {16}, "output rel L2"},
      // threshold family, thr_eq: d2 == thr exactly must miss.
      {Fault::kThresholdInclusive, {436}, "decision"},
      // wrap family, lag M: the matched slot is the one the step overwrites.
      {Fault::kWriteBeforeRead, {364}, "decision"},
      // not_ready family: no match and no ring write for a request that is not ready.
      {Fault::kNoReadyGate, {516}, "ring entry written for a request that is not ready"},
      {Fault::kNoReadyGate, {524}, "decision"},
      // tie family, older twin unusable (E(p) <= F): argmin first, validity second.
      // policy family, K = 0: every would-be hit on a (depth-0) entry must miss.
      {Fault::kCapOffByOne, {853}, "decision"},
      // policy family, N = 7 with two heads: head 1 refreshes 3 steps after head 0.
      {Fault::kRefreshAllHeads, {869}, "decision"},
      // policy family, K = 1 with chains at lag 1: a capped miss must restart the chain.
      {Fault::kForcedMissChains, {874}, "ring entry depth"},
      {Fault::kSecondBest, {407}, "decision"},
      // grid: the tail must include the current token's own key.
      {Fault::kTailShort, {0}, "output rel L2"},
      // extreme family, cancel: entry = out ⊖ (sink ⊕ tail) in FP32 cancels to nothing.
      {Fault::kDowndateEntry, {623, 624}, "ring entry"},
      // gen_min family: m == gen_min is eligible.
      {Fault::kGenMinOffByOne, {496}, "decision"},
  };
  return e;
}
}  // namespace
