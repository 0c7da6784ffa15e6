#define BOOST_TEST_MODULE test_verification
#include <boost/test/included/unit_test.hpp>
