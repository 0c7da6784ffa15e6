// The expected evaluation (lazy prompt entries, assembled from mac::oracle::attend_segments)
// agrees with the oracle's own MacOracle for the same decisions, and its decisions agree
// with the reference stepper.
#include <boost/test/unit_test.hpp>

#include "mac/oracle/oracle.hpp"
#include "mac/ref/stepper.hpp"
#include "mac/verify/abi_case.hpp"
#include "mac/verify/check.hpp"
#include "mac/verify/expected.hpp"

using namespace mac;
using namespace mac::verify;

namespace {
double rel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return (a - b).norm() / std::max(b.norm(), 1e-300);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(expected)

BOOST_AUTO_TEST_CASE(agrees_with_mac_oracle_and_reference_decisions) {
  // One case of each kind that exercises sinks, wraparound, ties, not-ready and E(m) = 0.
  for (const char* fam : {"grid", "wrap", "tie", "not_ready", "small", "gen_min"}) {
    const CaseSpec* pick = nullptr;
    for (const auto& c : builtin_matrix())
      if (c.family == fam && c.smoke) {
        pick = &c;
        break;
      }
    BOOST_REQUIRE(pick);
    const auto in = make_inputs(*pick);
    Expected ex(in);
    std::vector<std::unique_ptr<oracle::MacOracle>> orc;
    std::vector<std::unique_ptr<ref::DecodeStepper<double>>> stp;
    for (const auto& rq : in.requests) {
      orc.push_back(std::make_unique<oracle::MacOracle>(rq.layer, in.scale, in.params, rq.prompt));
      stp.push_back(std::make_unique<ref::DecodeStepper<double>>(rq.layer, in.scale, in.params));
      stp.back()->prefill(rq.prompt);
    }
    double worst = 0;
    int hits = 0;
    for (int64_t s = 0; s < pick->steps; ++s) {
      const auto st = ex.step(s);
      for (size_t i = 0; i < in.requests.size(); ++i) {
        const int64_t m = in.requests[i].prompt + s;
        std::vector<oracle::Decision> dec;
        for (const auto& e : st[i]) dec.push_back({e.hit, e.match_pos, in.requests[i].ready});
        const auto o = orc[i]->step(m, dec);
        const auto r = stp[i]->step(m, in.requests[i].ready);
        for (size_t h = 0; h < st[i].size(); ++h) {
          const auto& e = st[i][h];
          hits += e.hit;
          BOOST_TEST(e.hit == r.heads[h].hit, fam << " m " << m << " head " << h);
          BOOST_TEST(e.match_pos == r.heads[h].match_pos);
          BOOST_TEST(e.keys_read == o.heads[h].keys_read);
          worst = std::max(worst, rel(e.out.o, o.heads[h].out.o));
          worst = std::max(worst, std::abs(e.out.lse - o.heads[h].out.lse) /
                                      std::max(1.0, std::abs(o.heads[h].out.lse)));
          if (!o.heads[h].entry.is_empty())
            worst = std::max(worst, rel(e.entry.o, o.heads[h].entry.o));
          BOOST_TEST(e.entry.is_empty() == o.heads[h].entry.is_empty());
        }
      }
    }
    BOOST_TEST_MESSAGE(fam << ": hits " << hits << ", worst relative difference to MacOracle "
                           << worst);
    BOOST_TEST(worst < 1e-12);
  }
}

// A ring far larger than the case's positions (M up to kMaxTokens, as a matrix line may say):
// the expected evaluation keeps min(M, P + steps) slots, as the oracle does, and gives the
// decisions of M = P + steps (no slot wraps either way); the FP32 reference passes it. The
// plugin ABI, whose ring has M slots per head, refuses it with the size it would need.
BOOST_AUTO_TEST_CASE(a_ring_larger_than_the_positions_is_bounded) {
  CaseSpec huge = builtin_matrix()[5];  // grid, one request, P = 700, 6 steps, hits planted
  huge.M = kMaxTokens;
  CaseSpec exact = huge;
  exact.M = huge.context(0) + huge.steps;
  const auto in_huge = make_inputs(huge), in_exact = make_inputs(exact);
  Expected a(in_huge), b(in_exact);
  int hits = 0;
  for (int64_t s = 0; s < huge.steps; ++s) {
    const auto x = a.step(s), y = b.step(s);
    for (size_t h = 0; h < x[0].size(); ++h) {
      BOOST_TEST(x[0][h].hit == y[0][h].hit);
      BOOST_TEST(x[0][h].match_pos == y[0][h].match_pos);
      BOOST_TEST(x[0][h].out.lse == y[0][h].out.lse);
      hits += x[0][h].hit;
    }
  }
  BOOST_TEST(hits > 0);
  RunOptions opt;
  opt.tol = Tolerances::cpu();
  auto impl = make_reference_impl();
  const auto r = run_case(huge, *impl, opt);
  BOOST_TEST((r.status == CaseStatus::kPass), r.message);
  BOOST_TEST(r.expected_hits == hits);
  const macv_caps caps = verify::abi::caps_from_text("name = k\n");
  try {
    verify::abi::AbiCase ab(in_huge, verify::abi::choose(caps, huge));
    BOOST_ERROR("an ABI ring of M = 2^31 - 1 slots was laid out");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("more than this machine's memory") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(rel_l2_is_nan_and_range_safe) {
  Eigen::VectorXd b(3);
  b << 1e30, -2e30, 3e30;
  std::vector<double> a = {1e30, -2e30, 3.0000003e30};
  BOOST_TEST(rel_l2(a, b) < 1e-6);
  a[0] = std::nan("");
  BOOST_TEST(std::isinf(rel_l2(a, b)));
  Eigen::VectorXd t(2);
  t << 1e-300, 0;
  BOOST_TEST(rel_l2({2e-300, 0}, t) == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
