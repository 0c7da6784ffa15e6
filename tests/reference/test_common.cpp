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
  expect_message(with([](MacParams& p) { p.tau = std::nan(""); }), "tau = nan");
  expect_message(with([](MacParams& p) { p.ring = 0; }), "ring M = 0");
  expect_message(with([](MacParams& p) { p.tail = -1; }), "tail r = -1");
  expect_message(with([](MacParams& p) { p.sinks = -2; }), "sinks F = -2");
  expect_message(with([](MacParams& p) { p.gen_min = -3; }), "gen_min = -3");
}

BOOST_AUTO_TEST_SUITE_END()
