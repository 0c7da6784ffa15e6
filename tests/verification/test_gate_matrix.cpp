// The gate family of the matrix (semantics §3.5) does what verification/gen_matrix.py says each
// case is for: every case is replayed through the reference stepper, request by request, and the
// branches of the rule it takes are counted; the expected evaluation keeps the same state step
// for step; the gate columns are parsed with their ranges; the state check names what differs.
#include <boost/test/unit_test.hpp>

#include "mac/ref/stepper.hpp"
#include "mac/verify/case.hpp"
#include "mac/verify/check.hpp"
#include "mac/verify/expected.hpp"
#include "mac/verify/inputs.hpp"

#include <map>

using namespace mac;
using namespace mac::verify;

namespace {

/*! What one case's gate did, summed over its requests and steps. */
struct GateBranches {
  int64_t on = 0, off = 0, floor = 0;  //!< eligible steps by mode
  int64_t ineligible = 0;              //!< steps the gate neither acted on nor counted
  int64_t close_pay = 0;               //!< windows that closed with the gate staying on
  int64_t close_no_pay = 0;            //!< ... that switched it off by the margin μ
  int64_t close_few_hits = 0;          //!< ... by too few hits only (h_min)
  int64_t probes = 0;                  //!< gated runs that ended (off_left reached 0)
  int64_t forced = 0;                  //!< would-be hits a policy of §3.3 turned into misses
  bool diverged = false;               //!< two requests' states differed after some step
  bool state_agrees = true;            //!< the expected evaluation kept the stepper's state
};

bool same(const GateState& a, const GateState& b) { return gate_state_row(a) == gate_state_row(b); }

GateBranches replay(const CaseSpec& c) {
  const auto in = make_inputs(c);
  Expected ex(in);
  std::vector<std::unique_ptr<ref::DecodeStepper<float>>> st;
  for (const auto& rq : in.requests) {
    st.push_back(std::make_unique<ref::DecodeStepper<float>>(rq.layer, in.scale, in.params,
                                                             Variant::kSplit, StateStorage::kFull));
    st.back()->prefill(rq.prompt);
  }
  GateBranches g;
  const GateConfig& cfg = st[0]->gate_config();
  for (int64_t s = 0; s < c.steps; ++s) {
    ex.step(s);
    for (size_t i = 0; i < in.requests.size(); ++i) {
      const GateState before = st[i]->gate_state();
      const auto r = st[i]->step(in.requests[i].prompt + s, in.requests[i].ready);
      for (const auto& h : r.heads)
        g.forced += h.policy == ref::PolicyMiss::kRefresh || h.policy == ref::PolicyMiss::kDepthCap;
      const GateState& after = r.gate.state;
      switch (r.gate.mode) {
        case GateMode::kNone: ++g.ineligible; break;
        case GateMode::kFloor: ++g.floor; break;
        case GateMode::kOff:
          ++g.off;
          g.probes += after.off_left == 0;
          break;
        case GateMode::kOn:
          ++g.on;
          if (before.steps + 1 == cfg.window) {
            const bool no_pay = kGatePerMille * (before.bytes_mac + r.gate.bytes) >=
                                cfg.margin * (before.bytes_full + r.gate.bytes_full);
            if (after.off_left == 0)
              ++g.close_pay;
            else if (no_pay)
              ++g.close_no_pay;
            else
              ++g.close_few_hits;
          }
          break;
      }
      g.state_agrees = g.state_agrees && same(after, ex.gate_state(static_cast<int>(i))) &&
                       ex.gate_mode(static_cast<int>(i)) == r.gate.mode;
      g.diverged = g.diverged || !same(after, st[0]->gate_state());
    }
  }
  return g;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gate_matrix)

// Every claim of gen_matrix.py's table, per case id (the family starts at id 901).
BOOST_AUTO_TEST_CASE(gate_cases_take_the_branches_they_are_for) {
  std::map<int, GateBranches> b;
  for (const auto& c : builtin_matrix())
    if (c.family == "gate") b[c.id] = replay(c);
  BOOST_REQUIRE(b.size() == 40u);
  for (const auto& [id, g] : b) {
    BOOST_TEST_MESSAGE("gate case " << id << ": on " << g.on << " off " << g.off << " floor "
                                    << g.floor << " ineligible " << g.ineligible << " close pay "
                                    << g.close_pay << " no-pay " << g.close_no_pay << " few-hits "
                                    << g.close_few_hits << " probes " << g.probes << " forced "
                                    << g.forced << " diverged " << g.diverged);
    BOOST_TEST(g.state_agrees, "case " << id << ": expected and reference gate states differ");
    // A gate case in which the gate never acts is worthless, but for the "never off" ones.
    const bool never_off = id == 901 || id == 902 || id == 913 || id == 914;
    if (never_off) {
      BOOST_TEST(g.off + g.floor == 0, "case " << id);
      BOOST_TEST(g.close_pay >= 2, "case " << id);
    } else {
      BOOST_TEST(g.off + g.floor > 0, "case " << id << " never gated a step");
    }
  }
  auto at = [&](int id) { return b.at(id); };
  for (int id = 903; id <= 910; ++id) {  // μ: windows close with MAC not paying, probe cycles
    BOOST_TEST(at(id).close_no_pay >= 2, "case " << id);
    BOOST_TEST(at(id).probes >= 2, "case " << id);
  }
  for (int id : {911, 912}) {  // h_min: hits short of the rate, bytes paying
    BOOST_TEST(at(id).close_few_hits >= 2, "case " << id);
    BOOST_TEST(at(id).close_no_pay == 0, "case " << id);
  }
  for (int id : {915, 916, 940})  // the floor at every eligible step: the state stays zero
    BOOST_TEST((at(id).on + at(id).off == 0 && at(id).floor > 0), "case " << id);
  for (int id : {917, 918})  // the floor for some steps or requests, the window for others
    BOOST_TEST((at(id).floor > 0 && at(id).on > 0), "case " << id);
  BOOST_TEST(at(918).diverged);
  for (int id = 919; id <= 922; ++id) {  // batch: per-request states diverge
    BOOST_TEST(at(id).diverged, "case " << id);
    BOOST_TEST((at(id).close_pay > 0 && at(id).close_no_pay > 0), "case " << id);
  }
  for (int id = 923; id <= 926; ++id) {  // ineligible steps between eligible ones
    BOOST_TEST(at(id).ineligible > 0, "case " << id);
    BOOST_TEST(at(id).on > 0, "case " << id);
  }
  for (int id : {927, 928, 929, 931, 932, 933}) BOOST_TEST(at(id).off > 0, "case " << id);
  BOOST_TEST((at(930).floor > 0 && at(930).on > 0));  // F 2000: sinks keep the floor a while
  for (int id = 931; id <= 933; ++id) BOOST_TEST(at(id).on + at(id).off > 16, "case " << id);
  for (int id = 934; id <= 939; ++id) {  // K, N: forced misses make too few hits
    BOOST_TEST(at(id).forced > 0, "case " << id);
    BOOST_TEST(at(id).close_few_hits > 0, "case " << id);
  }
}

BOOST_AUTO_TEST_CASE(gate_columns_parse_with_their_ranges) {
  const auto& m = builtin_matrix();
  BOOST_TEST(m.size() == 941u);
  const auto& first = m[901];
  BOOST_TEST(first.family == "gate");
  BOOST_TEST(first.W == 4);
  BOOST_TEST(first.P == 3);
  BOOST_TEST(first.mu == 1000);
  BOOST_TEST(first.Bfix == 0);
  BOOST_TEST(first.params().gate_window == 4);
  BOOST_TEST(first.params().gate_probe == 3);
  BOOST_TEST(first.params().gate_fixed_bytes == 0);
  BOOST_TEST(m[915].params().gate_fixed_bytes == kGateFixedBytesDefault);
  BOOST_TEST(m[911].params().gate_min_hit == 501);
  // Cases before the family have the gate off and the defaults.
  for (int id : {0, 500, 900}) {
    BOOST_TEST(!m[static_cast<size_t>(id)].has_gate());
    BOOST_TEST(m[static_cast<size_t>(id)].P == 256);
    BOOST_TEST(m[static_cast<size_t>(id)].mu == 1000);
    BOOST_TEST(m[static_cast<size_t>(id)].hmin == 0);
    BOOST_TEST(m[static_cast<size_t>(id)].Bfix == kGateFixedBytesDefault);
  }
  for (const auto& c : m) BOOST_TEST(c.has_gate() == (c.family == "gate"), "case " << c.id);
  const auto line = first.to_line();
  BOOST_TEST(parse_case(line).to_line() == line);
  // (A gate column out of range: test_matrix.cpp, bad_lines_name_the_column.)
  // A line without the five gate columns (the 25 columns of the earlier matrix) is refused.
  std::string old = line;
  for (int k = 0; k < 5; ++k) old = old.substr(0, old.rfind('\t'));
  try {
    parse_case(old);
    BOOST_TEST(false, "a 25-column line was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("has 25 columns, expected 30") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(state_check_names_field_got_and_expected) {
  GateState want;
  want.bytes_mac = 100;
  want.bytes_full = 200;
  want.hits = 3;
  want.steps = 2;
  want.off_left = 0;
  BOOST_TEST(gate_state_diff({100, 200, 3, 2, 0}, want) == "");
  BOOST_TEST(gate_state_diff({100, 200, 3, 2, 1}, want) == "off_left got 1, expected 0");
  BOOST_TEST(gate_state_diff({101, 200, 4, 2, 0}, want) == "bytes_mac got 101, expected 100");
  BOOST_TEST(gate_state_diff({100, 200, 3, 2 + (int64_t{1} << 32), 0}, want) ==
             "steps got 4294967298, expected 2");
}

BOOST_AUTO_TEST_SUITE_END()
