// reference/src/common.cpp: the enum names read and written by every file and command line,
// and MacParams::validate, which must name the offending value.
#include "mac/ref/common.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

using namespace mac;

namespace {

void expect_message(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    BOOST_ERROR("no InputError for '" << needle << "'");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(common)

BOOST_AUTO_TEST_CASE(enum_names_round_trip_and_unknown_names_are_refused) {
  for (auto v : {Variant::kSplit, Variant::kDowndate})
    BOOST_TEST((parse_variant(to_string(v)) == v));
  for (auto s : {StateStorage::kProduction, StateStorage::kFull})
    BOOST_TEST((parse_state_storage(to_string(s)) == s));
  for (auto m : {PrefillMode::kDirect, PrefillMode::kDowndate})
    BOOST_TEST((parse_prefill_mode(to_string(m)) == m));
  for (auto p : {Precision::kFp32, Precision::kFp64})
    BOOST_TEST((parse_precision(to_string(p)) == p));
  // Names are exact: no case folding, no prefixes.
  expect_message([] { parse_variant("Split"); }, "variant 'Split'");
  expect_message([] { parse_state_storage("bf16"); }, "state storage 'bf16'");
  expect_message([] { parse_prefill_mode(""); }, "prefill mode ''");
  expect_message([] { parse_precision("fp16"); }, "precision 'fp16'");
}

BOOST_AUTO_TEST_CASE(mac_params_validate_names_the_bad_value) {
  MacParams ok;
  BOOST_CHECK_NO_THROW(ok.validate());
  auto with = [](auto set) {
    MacParams p;
    set(p);
    return [p] { p.validate(); };
  };
  expect_message(with([](MacParams& p) { p.tau = 1.0; }), "tau = 1");
  // τ < 0 would make unrelated queries hit (threshold above the null-model distance 2·D).
  expect_message(with([](MacParams& p) { p.tau = -0.1; }), "tau = -0.1");
  expect_message(with([](MacParams& p) { p.ring = kMaxTokens + 1; }), "ring M = 2147483648");
  expect_message(with([](MacParams& p) { p.tail = int64_t{1} << 40; }), "tail r = 1099511627776");
  expect_message(with([](MacParams& p) { p.tau = std::nan(""); }), "tau = nan");
  expect_message(with([](MacParams& p) { p.ring = 0; }), "ring M = 0");
  expect_message(with([](MacParams& p) { p.tail = -1; }), "tail r = -1");
  expect_message(with([](MacParams& p) { p.sinks = -2; }), "sinks F = -2");
  expect_message(with([](MacParams& p) { p.gen_min = -3; }), "gen_min = -3");
}

// checked_product: the product of sizes from input, refused past the limit without ever
// overflowing int64 (the factors are named; the product itself may not be representable).
BOOST_AUTO_TEST_CASE(checked_product_refuses_overflow_and_the_limit) {
  BOOST_TEST(checked_product("x", {3, 4, 5}) == 60);
  BOOST_TEST(checked_product("x", {0, int64_t{1} << 62, 7}) == 0);
  BOOST_TEST(checked_product("x", {int64_t{1} << 20, int64_t{1} << 16}) == int64_t{1} << 36);
  expect_message(
      [] {
        checked_product("trace q_pre", {int64_t{1} << 58, 4, 64});
      },
      "trace q_pre: 288230376151711744 x 4 x 64 elements exceed the limit of");
  expect_message(
      [] {
        checked_product("x", {int64_t{1} << 62, int64_t{1} << 62});
      },
      "exceed the limit");
  expect_message([] { checked_product("x", {10, 11}, 100); }, "10 x 11 elements exceed");
  expect_message([] { checked_product("x", {-1, 2}); }, "size -1 is negative");
  // The process-wide limit (lowered by the fuzzers) applies when none is given.
  const int64_t before = set_max_elements(1000);
  expect_message([] { checked_product("x", {100, 11}); }, "limit of 1000");
  BOOST_TEST(set_max_elements(before) == 1000);
  BOOST_TEST(max_elements() == kMaxElements);
}

BOOST_AUTO_TEST_SUITE_END()
