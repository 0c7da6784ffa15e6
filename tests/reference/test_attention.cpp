// Exact partial attention (reference/src/attention.cpp): range preconditions.
#include "mac/ref/attention.hpp"
#include "test_layers.hpp"

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(attention)

BOOST_AUTO_TEST_CASE(ranges_outside_the_layer_are_refused) {
  auto l = mac::test::random_layer(20, 1, 1, 64, 48);
  BOOST_CHECK_THROW(mac::ref::attend<double>(l, 0, l.q_post_at(0, 0), 0.125, 5, 25),
                    mac::InputError);
  BOOST_CHECK_THROW(mac::ref::attend<double>(l, 1, l.q_post_at(0, 0), 0.125, 0, 5),
                    mac::InputError);
}

BOOST_AUTO_TEST_SUITE_END()
