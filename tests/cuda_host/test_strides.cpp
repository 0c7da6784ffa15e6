// Host checks of the step's per-head tensor strides (cuda/src/strides.hpp): 0 resolves to the
// packed layout, and the validation refuses negative, misaligned and overlapping strides with
// a message naming the tensor and the value, and accepts the nested layouts in use.
#define BOOST_TEST_MODULE strides
#include <boost/test/included/unit_test.hpp>

#include <string>

#include "strides.hpp"

namespace sd = mac::cuda::detail;

BOOST_AUTO_TEST_CASE(zero_resolves_to_packed) {
  const sd::HeadStrides s = sd::resolve_strides(0, 0, 8, 128);
  BOOST_TEST(s.head == 128);
  BOOST_TEST(s.row == 8 * 128);
  // A given head stride sets the packed row stride; given strides pass through.
  BOOST_TEST(sd::resolve_strides(0, 256, 8, 128).row == 8 * 256);
  const sd::HeadStrides g = sd::resolve_strides(5000, 136, 8, 128);
  BOOST_TEST(g.row == 5000);
  BOOST_TEST(g.head == 136);
  BOOST_TEST(sd::resolve_strides(0, 0, 8, 1).row == 8);  // lse: [N, Hq]
}

BOOST_AUTO_TEST_CASE(valid_layouts_pass) {
  // Packed, padded heads, padded rows, and heads-major ([Hq, N, D]) layouts.
  BOOST_TEST(sd::check_strides("out", 0, 0, 4, 8, 128, 1, true).empty());
  BOOST_TEST(sd::check_strides("q", 0, 136, 4, 8, 128, 8, true).empty());
  BOOST_TEST(sd::check_strides("q", 2048, 128, 4, 8, 128, 8, true).empty());
  BOOST_TEST(sd::check_strides("out", 128, 4 * 128, 4, 8, 128, 1, true).empty());
  BOOST_TEST(sd::check_strides("lse", 1, 4, 4, 8, 1, 1, true).empty());
  // One row: its stride is never used, so any value ≥ 0 passes.
  BOOST_TEST(sd::check_strides("out", 7, 0, 1, 8, 128, 1, true).empty());
}

BOOST_AUTO_TEST_CASE(bad_strides_are_named) {
  const std::string neg = sd::check_strides("out", -1, 0, 4, 8, 128, 1, true);
  BOOST_TEST(neg.find("out") != std::string::npos);
  BOOST_TEST(neg.find("-1") != std::string::npos);
  const std::string mis = sd::check_strides("q", 0, 132, 4, 8, 128, 8, true);
  BOOST_TEST(mis.find("132") != std::string::npos);
  BOOST_TEST(mis.find("multiples of 8") != std::string::npos);
  // Heads closer than a vector, and rows closer than all heads of a row.
  const std::string heads = sd::check_strides("out", 0, 64, 4, 8, 128, 1, true);
  BOOST_TEST(heads.find("overlap") != std::string::npos);
  BOOST_TEST(heads.find("head 64") != std::string::npos);
  const std::string rows = sd::check_strides("out", 1000, 128, 4, 8, 128, 1, true);
  BOOST_TEST(rows.find("row 1000") != std::string::npos);
  BOOST_TEST(!sd::check_strides("lse", 4, 1, 4, 8, 1, 1, true).empty());
  // Overlap is not checked where the tensor is absent (lse nullptr): alignment still is.
  BOOST_TEST(sd::check_strides("lse", 4, 1, 4, 8, 1, 1, false).empty());
  BOOST_TEST(!sd::check_strides("q", 0, 4, 4, 8, 128, 8, false).empty());
}
