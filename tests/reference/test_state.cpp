#include "mac/ref/state.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <random>

using mac::ref::AttnState;

namespace {
template <typename T>
AttnState<T> random_state(std::mt19937_64& rng, int d, T lse) {
  std::normal_distribution<double> n(0.0, 1.0);
  AttnState<T> s;
  s.o.resize(d);
  for (int i = 0; i < d; ++i) s.o[i] = static_cast<T>(n(rng));
  s.lse = lse;
  return s;
}
template <typename T>
T rel_l2(const mac::ref::Vec<T>& a, const mac::ref::Vec<T>& b) {
  return (a - b).norm() / b.norm();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(state_algebra)

BOOST_AUTO_TEST_CASE(merge_is_commutative_and_associative) {
  std::mt19937_64 rng(11);
  const auto a = random_state<double>(rng, 64, 3.0), b = random_state<double>(rng, 64, -2.5),
             c = random_state<double>(rng, 64, 7.25);
  const auto ab = merge(a, b), ba = merge(b, a);
  BOOST_TEST(ab.lse == ba.lse);
  BOOST_TEST(rel_l2(ab.o, ba.o) < 4 * std::numeric_limits<double>::epsilon());
  const auto l = merge(merge(a, b), c), r = merge(a, merge(b, c));
  BOOST_TEST(std::abs(l.lse - r.lse) <
             8 * std::numeric_limits<double>::epsilon() * std::abs(l.lse));
  BOOST_TEST(rel_l2(l.o, r.o) < 16 * std::numeric_limits<double>::epsilon());
}

BOOST_AUTO_TEST_CASE(empty_state_rules) {
  std::mt19937_64 rng(12);
  const auto a = random_state<float>(rng, 16, 1.5f);
  const auto e = AttnState<float>::empty(16);
  BOOST_TEST(e.is_empty());
  const auto ae = merge(a, e), ea = merge(e, a), ee = merge(e, e);
  BOOST_TEST(ae.lse == a.lse);
  BOOST_TEST((ae.o.array() == a.o.array()).all());
  BOOST_TEST((ea.o.array() == a.o.array()).all());
  BOOST_TEST(ee.is_empty());
  BOOST_TEST(!std::isnan(ee.lse));
  BOOST_TEST(ee.o.allFinite());
  // A NaN LSE counts as empty on either side of ⊕.
  auto n = a;
  n.lse = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(n.is_empty());
  BOOST_TEST(merge(n, a).lse == a.lse);
  BOOST_TEST(merge(e, n).is_empty());
}

BOOST_AUTO_TEST_CASE(downdate_undoes_merge) {
  std::mt19937_64 rng(13);
  const auto a = random_state<double>(rng, 128, 4.0), w = random_state<double>(rng, 128, 2.0);
  const auto total = merge(a, w);
  const auto r = downdate(total, w);
  BOOST_TEST(!r.emptied);
  BOOST_TEST(std::abs(r.state.lse - a.lse) < 1e-13);
  BOOST_TEST(rel_l2(r.state.o, a.o) < 1e-13);
  // t = e^{2−(lse)} small: well conditioned.
  BOOST_TEST(r.condition < 1.2);
  // Removing an empty set is the identity.
  const auto id = downdate(total, AttnState<double>::empty(128));
  BOOST_TEST(id.state.lse == total.lse);
}

BOOST_AUTO_TEST_CASE(downdate_near_total_cancellation) {
  std::mt19937_64 rng(14);
  // W holds all but e^{-30} of the mass: the condition number is ~e^{30} and the
  // remaining part is recovered to about eps·cond relative accuracy in the LSE sense.
  const auto a = random_state<double>(rng, 32, -20.0), w = random_state<double>(rng, 32, 10.0);
  const auto total = merge(a, w);
  const auto r = downdate(total, w);
  BOOST_TEST(r.condition > 1e12);
  BOOST_TEST(r.condition < 1e14);
  // LSE of the remainder: L_T + ln(1−t), with 1−t from expm1 — accurate to about eps·cond in t.
  BOOST_TEST(std::abs(r.state.lse - a.lse) < 1e-2);
  // Exact total cancellation: W == T returns empty, never NaN.
  const auto all = downdate(w, w);
  BOOST_TEST(all.emptied);
  BOOST_TEST(all.state.is_empty());
  BOOST_TEST(all.state.o.allFinite());
  // t slightly > 1 (rounding) is also "all the mass".
  auto w2 = w;
  w2.lse = w.lse + 1e-15;
  BOOST_TEST(downdate(w, w2).emptied);
}

BOOST_AUTO_TEST_CASE(lse_base_conversion_is_caught) {
  // A base-2 LSE read as natural log is wrong by a factor ln 2; the helper converts it.
  const double l = 3.7;
  BOOST_TEST(std::abs(mac::lse_from_log2(mac::lse_to_log2(l)) - l) < 1e-15);
  BOOST_TEST(std::abs(mac::lse_to_log2(l) - l / std::log(2.0)) < 1e-15);
}

BOOST_AUTO_TEST_SUITE_END()
