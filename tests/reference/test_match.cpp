#include "mac/ref/bf16.hpp"
#include "mac/ref/match.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {
// An independent transcription of docs/semantics.md §3.1, written as a simulated warp: 32 lane
// registers, lanes ≥ D/8 idle, each shuffle-xor round reads the partner's register
// from a snapshot, exactly as __shfl_xor_sync would.
float warp_style_d2(const float* a, const float* b, int d) {
  float reg[32] = {0};
  const int active = d / 8;
  for (int lane = 0; lane < active; ++lane) {
    float acc = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const float x = a[lane * 8 + j], y = b[lane * 8 + j];
      acc = std::fmaf(x - y, x - y, acc);
    }
    reg[lane] = acc;
  }
  for (int off = d / 16; off > 0; off >>= 1) {
    float snap[32];
    std::memcpy(snap, reg, sizeof reg);
    for (int lane = 0; lane < active; ++lane) reg[lane] = snap[lane] + snap[lane ^ off];
  }
  return reg[0];
}
uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(canonical_match)

BOOST_AUTO_TEST_CASE(canonical_d2_is_bit_identical_to_warp_transcription) {
  std::mt19937_64 rng(21);
  std::normal_distribution<float> n(0.0f, 3.0f);
  int differs_from_sequential = 0;
  for (int d : {64, 128, 256}) {
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
    for (int trial = 0; trial < 2000; ++trial) {
      for (int i = 0; i < d; ++i) {
        a[static_cast<size_t>(i)] = mac::ref::round_bf16(n(rng));
        b[static_cast<size_t>(i)] = mac::ref::round_bf16(n(rng));
      }
      const float c = mac::ref::canonical_d2(a.data(), b.data(), d);
      BOOST_TEST_REQUIRE(bits(c) == bits(warp_style_d2(a.data(), b.data(), d)));
      float seq = 0.0f;  // a different order, to show the test can tell orders apart
      for (int i = 0; i < d; ++i)
        seq += (a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)]) *
               (a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)]);
      differs_from_sequential += bits(seq) != bits(c);
      // FP64 distance within FP32 rounding of the canonical one.
      const double e = mac::ref::d2_fp64(a.data(), b.data(), d);
      BOOST_TEST(std::abs(c - e) <= 1e-5 * e + 1e-30);
    }
  }
  BOOST_TEST(differs_from_sequential > 0);
}

BOOST_AUTO_TEST_CASE(threshold_value) {
  // D = 128, τ = 0.45: 2·128·0.55² = 77.44 (docs/semantics.md §2), rounded once to FP32.
  BOOST_TEST(mac::match_threshold(128, 0.45) == static_cast<float>(77.44));
  BOOST_TEST(mac::match_threshold(64, 0.5) == 32.0f);
}

BOOST_AUTO_TEST_CASE(bad_head_dim_rejected) {
  std::vector<float> a(40, 0.0f);
  BOOST_CHECK_THROW(mac::ref::canonical_d2(a.data(), a.data(), 40), mac::InputError);
}

BOOST_AUTO_TEST_SUITE_END()
