#include "mac/ref/attention.hpp"
#include "mac/ref/state.hpp"
#include "test_layers.hpp"

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

BOOST_AUTO_TEST_CASE(lse_base_conversion_round_trips) {
  // The one named conversion (semantics.hpp): base 2 = natural · log2(e), and back.
  const double l = 3.7;
  BOOST_TEST(std::abs(mac::lse_from_log2(mac::lse_to_log2(l)) - l) < 1e-15);
  BOOST_TEST(std::abs(mac::lse_to_log2(l) - l / std::log(2.0)) < 1e-15);
}

// The merge is the boundary every partial state crosses (band, sinks, tail, ring entry): a
// base-2 LSE fed to it must show as an error, and converting it with lse_from_log2 must
// remove the error. Halves [0, T/2) and [T/2, T) of one query, FP64 throughout.
BOOST_AUTO_TEST_CASE(base2_lse_fed_to_merge_is_caught) {
  const int64_t T = 64, D = 64;
  const auto layer = mac::test::random_layer(T, 1, 1, D, 29);
  const double scale = mac::test::default_scale(D);
  const float* q = layer.q_post_at(T - 1, 0);
  const auto full = mac::ref::attend<double>(layer, 0, q, scale, 0, T);
  const auto a = mac::ref::attend<double>(layer, 0, q, scale, 0, T / 2);
  const auto b = mac::ref::attend<double>(layer, 0, q, scale, T / 2, T);
  // ln and log2 agree only at L = 0; the halves hold T/2 keys each, so L ≈ ln(T/2) ≈ 3.5.
  BOOST_TEST_REQUIRE(std::abs(a.lse) > 1.0);

  // Natural LSEs: attend sums T/2 terms (relative error ≤ (T/2)·ε_64 ≈ 4e-15) and the merge
  // adds a few ε_64: 1e-12 is more than 100× that.
  const double tol = 1e-12;
  const auto ok = merge(a, b);
  BOOST_TEST(rel_l2(ok.o, full.o) < tol);
  BOOST_TEST(std::abs(ok.lse - full.lse) < tol * std::abs(full.lse));

  // Half a's LSE in base 2, as a kernel keeps it internally: its weight is off by a factor
  // e^{L_a·(log2 e − 1)} ≈ e^{1.5}, far outside any tolerance (> 1e-3 relative).
  AttnState<double> a2 = a;
  a2.lse = mac::lse_to_log2(a.lse);
  const auto bad = merge(a2, b);
  BOOST_TEST(rel_l2(bad.o, full.o) > 1e-3);
  BOOST_TEST(std::abs(bad.lse - full.lse) > 0.1);

  // Converted at the boundary, the same state merges correctly again.
  AttnState<double> back = a2;
  back.lse = mac::lse_from_log2(a2.lse);
  const auto fixed = merge(back, b);
  BOOST_TEST(rel_l2(fixed.o, full.o) < tol);
  BOOST_TEST(std::abs(fixed.lse - full.lse) < tol * std::abs(full.lse));
}

BOOST_AUTO_TEST_SUITE_END()
