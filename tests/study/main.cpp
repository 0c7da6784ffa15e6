#define BOOST_TEST_MODULE mac_study
#include <boost/test/included/unit_test.hpp>
