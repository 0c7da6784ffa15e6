// LayerData / TraceMeta validation (reference/src/trace.cpp).
#include "mac/ref/trace.hpp"
#include "test_layers.hpp"

#include <boost/test/unit_test.hpp>

#include <limits>
#include <string>

using mac::ref::LayerData;

BOOST_AUTO_TEST_SUITE(trace_validation)

BOOST_AUTO_TEST_CASE(bad_values_are_named) {
  auto l = mac::test::random_layer(20, 2, 1, 64, 47);
  // Values: NaN, Inf, not BF16-exact, wrong sizes — each names the dataset.
  auto check = [](const LayerData& x, const std::string& needle) {
    try {
      x.validate("/layers/0");
      BOOST_ERROR("no error for " << needle);
    } catch (const mac::InputError& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  auto nan = l;
  nan.k[5] = std::numeric_limits<float>::quiet_NaN();
  check(nan, "/layers/0/k");
  auto inf = l;
  inf.v[7] = std::numeric_limits<float>::infinity();
  check(inf, "/layers/0/v");
  auto inexact = l;
  inexact.q_pre[3] = 0.1f;
  check(inexact, "not BF16-exact");
  auto shape = l;
  shape.q_post.pop_back();
  check(shape, "/layers/0/q_post");
}

// Sizes from input are checked against their limits before anything is allocated: a layer
// declaring 2^58 tokens used to overflow T·Hq·D (signed) and allocate a wrapped size.
BOOST_AUTO_TEST_CASE(huge_sizes_are_refused_before_allocation) {
  auto refused = [](auto f, const std::string& needle) {
    try {
      f();
      BOOST_ERROR("no error for " << needle);
    } catch (const mac::InputError& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  LayerData l;
  refused([&] { l.resize(int64_t{1} << 58, 4, 2, 64); }, "tokens T = 288230376151711744");
  refused([&] { l.resize(int64_t{1} << 30, 1 << 16, 1, 256); }, "exceed the limit");
  BOOST_TEST(l.q_pre.empty());
  LayerData declared = mac::test::random_layer(4, 2, 1, 64, 48);
  declared.tokens = int64_t{1} << 58;  // as a file may declare
  refused([&] { declared.validate("/layers/0"); }, "/layers/0: tokens = 288230376151711744");
  declared.tokens = 4;
  declared.num_q_heads = int64_t{1} << 40;
  declared.num_kv_heads = int64_t{1} << 40;
  refused([&] { declared.validate("/layers/0"); }, "exceed the limit");
}

// s·max‖q_post‖·max‖k‖ must stay below FLT_MAX / 2, or the FP32 LSE becomes infinite.
BOOST_AUTO_TEST_CASE(a_softmax_scale_that_overflows_fp32_logits_is_refused) {
  const auto l = mac::test::random_layer(16, 2, 1, 64, 49);
  BOOST_CHECK_NO_THROW(l.check_logit_range(0.125, "layer"));
  try {
    l.check_logit_range(1e300, "/layers/3");
    BOOST_ERROR("no error for softmax_scale 1e300");
  } catch (const mac::InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("/layers/3: softmax_scale 1e+300") != std::string::npos, what);
    BOOST_TEST(what.find("LSE") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_SUITE_END()
