// reference/src/rope.cpp: RoPE in both pairings, checked against the defining properties
// (identity at position 0, a rotation per pair, logits that depend only on the offset) and
// one value worked by hand, so a swapped pairing or a wrong frequency cannot pass.
#include "mac/ref/rope.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace mac::ref;

namespace {

constexpr double kU = std::numeric_limits<float>::epsilon() / 2;  // FP32 unit roundoff

std::vector<float> random_vec(std::mt19937& g, int d) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(d));
  for (auto& x : v) x = n(g);
  return v;
}

std::vector<float> rotated(const std::vector<float>& x, int64_t pos, double theta, RopeStyle s) {
  std::vector<float> out(x.size());
  apply_rope(x.data(), out.data(), static_cast<int64_t>(x.size()), pos, theta, s);
  return out;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double norm(const std::vector<float>& a) { return std::sqrt(dot(a, a)); }

void expect_message(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    BOOST_ERROR("no InputError for '" << needle << "'");
  } catch (const mac::InputError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rope_pairs)

BOOST_AUTO_TEST_CASE(position_zero_is_the_identity) {
  std::mt19937 g(11);
  for (auto s : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    const auto x = random_vec(g, 64);
    BOOST_TEST(rotated(x, 0, 10000.0, s) == x, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(pairings_and_first_frequency_by_hand) {
  // Pair 0 has frequency theta^0 = 1, so at position 1 its angle is 1 radian; x = e_0.
  std::vector<float> x(8, 0.f);
  x[0] = 1.f;
  const float c = static_cast<float>(std::cos(1.0)), s = static_cast<float>(std::sin(1.0));
  const auto neox = rotated(x, 1, 10000.0, RopeStyle::kNeox);  // pairs (x_i, x_{i+D/2})
  const auto gptj = rotated(x, 1, 10000.0, RopeStyle::kGptj);  // pairs (x_{2i}, x_{2i+1})
  const std::vector<float> want_neox{c, 0, 0, 0, s, 0, 0, 0};
  const std::vector<float> want_gptj{c, s, 0, 0, 0, 0, 0, 0};
  BOOST_TEST(neox == want_neox, boost::test_tools::per_element());
  BOOST_TEST(gptj == want_gptj, boost::test_tools::per_element());
  // Last pair (i = D/2 − 1 = 3): angle pos·theta^(−6/8); e_3 (neox) pairs with e_7.
  std::vector<float> y(8, 0.f);
  y[3] = 1.f;
  const double ang = 5.0 * std::pow(100.0, -6.0 / 8.0);
  const auto r = rotated(y, 5, 100.0, RopeStyle::kNeox);
  BOOST_TEST(r[3] == static_cast<float>(std::cos(ang)));
  BOOST_TEST(r[7] == static_cast<float>(std::sin(ang)));
}

BOOST_AUTO_TEST_CASE(rotation_keeps_the_norm_and_logits_depend_on_the_offset_only) {
  std::mt19937 g(12);
  for (auto s : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    for (int d : {64, 128}) {
      const auto q = random_vec(g, d), k = random_vec(g, d);
      // Each output element is one FP64 value rounded to FP32 (relative error ≤ u), so
      // ‖rope(x)‖ is ‖x‖ within u·‖x‖ and a dot product of two rotated vectors is exact
      // within 2u·‖q‖‖k‖ (Cauchy–Schwarz); two such dots differ by at most 4u·‖q‖‖k‖.
      const double qk = norm(q) * norm(k);
      BOOST_TEST(std::abs(norm(rotated(q, 777, 10000.0, s)) - norm(q)) <= 2 * kU * norm(q));
      const double base = dot(rotated(q, 40, 10000.0, s), rotated(k, 10, 10000.0, s));
      for (int64_t shift : {1, 97, 5000}) {
        const double shifted =
            dot(rotated(q, 40 + shift, 10000.0, s), rotated(k, 10 + shift, 10000.0, s));
        BOOST_TEST(std::abs(shifted - base) <= 4 * kU * qk, "shift " << shift << " d " << d);
      }
      // And the offset does matter: a different offset gives a different logit.
      const double other = dot(rotated(q, 41, 10000.0, s), rotated(k, 10, 10000.0, s));
      BOOST_TEST(std::abs(other - base) > 4 * kU * qk);
    }
  }
}

BOOST_AUTO_TEST_CASE(output_may_alias_the_input) {
  std::mt19937 g(13);
  auto x = random_vec(g, 64);
  const auto want = rotated(x, 123, 500000.0, RopeStyle::kGptj);
  apply_rope(x.data(), x.data(), 64, 123, 500000.0, RopeStyle::kGptj);
  BOOST_TEST(x == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_named) {
  std::vector<float> x(8, 1.f), out(8);
  expect_message([&] { apply_rope(x.data(), out.data(), 7, 1, 1e4, RopeStyle::kNeox); },
                 "head_dim = 7");
  expect_message([&] { apply_rope(x.data(), out.data(), 8, 1, 0.0, RopeStyle::kNeox); },
                 "rope_theta = 0");
  expect_message([&] { apply_rope(x.data(), out.data(), 8, 1, NAN, RopeStyle::kNeox); },
                 "rope_theta = nan");
  BOOST_TEST((parse_rope_style("neox") == RopeStyle::kNeox));
  BOOST_TEST((parse_rope_style(to_string(RopeStyle::kGptj)) == RopeStyle::kGptj));
  expect_message([] { parse_rope_style("llama"); }, "rope_style 'llama'");
}

BOOST_AUTO_TEST_SUITE_END()
