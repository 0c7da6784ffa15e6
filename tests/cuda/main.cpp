// Boost.Test driver of the GPU suite: where no CUDA device is present (or the library was
// built without CUDA) the suite prints a visible SKIPPED line and exits with 77, which CTest
// reports as skipped (SKIP_RETURN_CODE), never as passed.
#define BOOST_TEST_MODULE mac_cuda
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/included/unit_test.hpp>

#include <cstdio>

#include "mac/cuda/mac_cuda.hpp"

int main(int argc, char** argv) {
  if (!mac::cuda::cuda_device_present()) {
    std::printf("SKIPPED: no CUDA device (%s); the GPU tests of mac_cuda did not run.\n",
                mac::cuda::built_with_cuda() ? mac::cuda::device_description().c_str()
                                             : "mac_cuda was built without CUDA");
    std::fflush(stdout);
    return 77;
  }
  std::printf("mac_cuda tests on %s\n", mac::cuda::device_description().c_str());
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
