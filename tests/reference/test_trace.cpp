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

BOOST_AUTO_TEST_SUITE_END()
