#define BOOST_TEST_MODULE mac_reference
#include <boost/test/included/unit_test.hpp>
