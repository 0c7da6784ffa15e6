#define BOOST_TEST_MODULE mac_tools
#include <boost/test/included/unit_test.hpp>
