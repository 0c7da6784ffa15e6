// mac::tools::Progress (tools/common/src/progress.cpp): the line it prints on stderr, the
// estimate of the time left, at most one line per interval, nothing when disabled, and the
// closing line only after a progress line.
#include "mac/tools/progress.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

using mac::tools::Progress;

namespace {

/*! What `f` writes to stderr (file descriptor 2, redirected to a temporary file). */
template <typename F>
std::string stderr_of(F&& f) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  BOOST_TEST_REQUIRE(tmp != nullptr);
  const int saved = ::dup(2);
  BOOST_TEST_REQUIRE(saved >= 0);
  BOOST_TEST_REQUIRE(::dup2(::fileno(tmp), 2) >= 0);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::rewind(tmp);
  std::string out;
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(progress)

BOOST_AUTO_TEST_CASE(a_line_names_the_label_the_count_the_share_and_the_times) {
  const std::string out = stderr_of([] {
    Progress p("sweep", 12, 0.0);
    p.update(3);
    p.finish();
  });
  const std::regex line(
      R"(\[sweep\] 3/12 \(25%\) elapsed \d+s, about \d+s left\n\[sweep\] done in \d+\.\ds\n)");
  BOOST_TEST(std::regex_match(out, line), out);
}

// left = elapsed · (total − done) / done: after ≥ 0.5 s with 1 of 5 done, at least 2 s left.
BOOST_AUTO_TEST_CASE(the_time_left_scales_the_elapsed_time_by_the_work_left) {
  double el = 0;
  const std::string out = stderr_of([&] {
    Progress p("x", 5, 0.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    p.update(1);
    el = p.elapsed_s();
  });
  std::smatch m;
  BOOST_TEST_REQUIRE(
      std::regex_match(out, m,
                       std::regex(R"(\[x\] 1/5 \(20%\) elapsed (\d+)s, about (\d+)s left\n)")),
      out);
  const double left = std::stod(m[2].str());
  BOOST_TEST(el >= 0.5);
  BOOST_TEST(left >= 2.0, out);
  BOOST_TEST(left <= 4 * el + 0.5, out << " (elapsed " << el << " s)");
}

BOOST_AUTO_TEST_CASE(at_most_one_line_per_interval_and_no_closing_line_without_one) {
  const std::string quiet = stderr_of([] {
    Progress p("slow", 10, 3600.0);
    for (int i = 1; i <= 10; ++i) p.update(i);
    p.finish();
  });
  BOOST_TEST(quiet.empty(), quiet);
  const std::string every = stderr_of([] {
    Progress p("fast", 3, 0.0);
    for (int i = 1; i <= 3; ++i) p.update(i);
  });
  // Every update prints (interval 0); the times are the only variable part.
  BOOST_TEST(std::regex_replace(every, std::regex(R"(elapsed \d+s, about \d+s)"), "T") ==
             "[fast] 1/3 (33%) T left\n[fast] 2/3 (67%) T left\n[fast] 3/3 (100%) T left\n");
}

BOOST_AUTO_TEST_CASE(disabled_prints_nothing_and_no_total_is_complete) {
  const std::string off = stderr_of([] {
    Progress p("off", 4, 0.0, false);
    p.update(2);
    p.finish();
  });
  BOOST_TEST(off.empty(), off);
  const std::string none = stderr_of([] { Progress("empty", 0, 0.0).update(0); });
  BOOST_TEST(
      std::regex_match(none, std::regex(R"(\[empty\] 0/0 \(100%\) elapsed \d+s, about 0s left\n)")),
      none);
}

BOOST_AUTO_TEST_SUITE_END()
