#define BOOST_TEST_MODULE mac_oracle
#include <boost/test/included/unit_test.hpp>
