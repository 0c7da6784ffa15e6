// Report round trip, merging of shards, and the failure reproducer's case line.
#include <boost/test/unit_test.hpp>

#include "mac/verify/report.hpp"

#include <cstdio>

using namespace mac;
using namespace mac::verify;

namespace {
CaseResult fake(int id, CaseStatus st) {
  CaseResult r;
  r.spec = builtin_matrix()[static_cast<size_t>(id)];
  r.status = st;
  r.message = st == CaseStatus::kFail ? "decision mismatch" : "";
  r.rel_l2_max = 1e-3 * id;
  r.decision_mismatch = st == CaseStatus::kFail;
  for (int h = 0; h < 2; ++h) {
    HeadMetrics hm;
    hm.request = 0;
    hm.head = h;
    hm.steps = 6;
    hm.rel_l2_max = 1e-4 * (id + h);
    hm.keys_read = 1000 + id;
    hm.failed = st == CaseStatus::kFail && h == 1;
    r.heads.push_back(hm);
  }
  return r;
}
std::string tmp(const char* name) { return std::string(MAC_BINARY_DIR) + "/" + name; }
}  // namespace

BOOST_AUTO_TEST_SUITE(report)

BOOST_AUTO_TEST_CASE(round_trip_and_merge) {
  Report a, b;
  a.meta.git_commit = b.meta.git_commit = "abc";
  a.meta.mode = b.meta.mode = "cpu";
  a.meta.device = b.meta.device = "cpu";
  a.meta.shard = "0/2";
  b.meta.shard = "1/2";
  a.cases = {fake(3, CaseStatus::kPass), fake(10, CaseStatus::kFail)};
  b.cases = {fake(5, CaseStatus::kSkip)};
  write_report(tmp("vt_a.h5"), a);
  write_report(tmp("vt_b.h5"), b);
  const Report ra = read_report(tmp("vt_a.h5"));
  BOOST_REQUIRE(ra.cases.size() == 2u);
  BOOST_TEST(ra.cases[1].spec.to_line() == a.cases[1].spec.to_line());
  BOOST_TEST((ra.cases[1].status == CaseStatus::kFail));
  BOOST_TEST(ra.cases[1].heads.size() == 2u);
  BOOST_TEST(ra.cases[1].heads[1].failed);
  BOOST_TEST(ra.cases[1].heads[0].keys_read == 1010);
  BOOST_TEST(ra.cases[1].rel_l2_max == 1e-2);
  BOOST_TEST(!ra.ok());
  const Report m = merge_reports({ra, read_report(tmp("vt_b.h5"))});
  BOOST_REQUIRE(m.cases.size() == 3u);
  BOOST_TEST(m.cases[0].spec.id == 3);
  BOOST_TEST(m.cases[1].spec.id == 5);
  BOOST_TEST(m.cases[2].spec.id == 10);
  BOOST_CHECK_THROW(merge_reports({ra, ra}), InputError);  // a case twice
  Report c = b;
  c.meta.git_commit = "other";
  BOOST_CHECK_THROW(merge_reports({ra, c}), InputError);
  BOOST_TEST(summary_table(m).find("RESULT: FAIL") != std::string::npos);
  BOOST_CHECK_THROW(read_report(tmp("does_not_exist.h5")), InputError);
}

// The certificate's verdict: a skipped case makes it INCOMPLETE (exit 3), a not-applicable
// case neither passes nor blocks PASS, and a failure or error always wins.
BOOST_AUTO_TEST_CASE(verdict_counts_skips_and_not_applicable) {
  Report r;
  r.cases = {fake(1, CaseStatus::kPass), fake(2, CaseStatus::kNotApplicable)};
  BOOST_TEST(r.result() == "PASS");
  BOOST_TEST(r.exit_code() == 0);
  r.cases.push_back(fake(3, CaseStatus::kSkip));
  BOOST_TEST(r.result() == "INCOMPLETE");
  BOOST_TEST(r.exit_code() == 3);
  BOOST_TEST(summary_table(r).find("RESULT: INCOMPLETE") != std::string::npos);
  r.cases.push_back(fake(4, CaseStatus::kError));
  BOOST_TEST(r.result() == "FAIL");
  BOOST_TEST(r.exit_code() == 1);
  Report na;
  na.cases = {fake(1, CaseStatus::kNotApplicable)};
  BOOST_TEST(na.result() == "INCOMPLETE");  // nothing applicable ran: nothing is certified
}

BOOST_AUTO_TEST_CASE(failure_file_keeps_the_case) {
  CaseResult r = fake(7, CaseStatus::kFail);
  ReportMeta meta;
  meta.git_commit = "abc";
  write_failure_file(tmp("vt_case7.h5"), r, meta);
  BOOST_TEST(read_failure_case_line(tmp("vt_case7.h5")) == r.spec.to_line());
  BOOST_CHECK_THROW(read_failure_case_line(tmp("vt_a.h5")), InputError);  // a report, not a case
}

BOOST_AUTO_TEST_SUITE_END()
