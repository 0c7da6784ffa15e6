// The one atomic writer (reference/src/io/atomic_file.cpp): the destination appears only
// complete, a failure leaves no file behind and names the destination.
#include <boost/test/unit_test.hpp>

#include "io_fixture.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace mac;
using mac::test::expect_input_error;
using mac::test::ScratchDir;

BOOST_AUTO_TEST_SUITE(atomic_file)

BOOST_AUTO_TEST_CASE(text_file_appears_whole) {
  ScratchDir dir;
  const std::string p = dir.path("a.txt");
  io::write_text_file(p, "one\ntwo\n");
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  BOOST_TEST(ss.str() == "one\ntwo\n");
  BOOST_TEST(dir.listing() == std::vector<std::string>{"a.txt"});
}

BOOST_AUTO_TEST_CASE(failed_write_removes_the_temporary_and_keeps_the_old_file) {
  ScratchDir dir;
  const std::string p = dir.path("r.h5");
  io::write_text_file(p, "old");
  BOOST_CHECK_THROW(io::write_h5_atomically(p,
                                            [](hid_t f) {
                                              h5::write_attr(f, "x", int64_t{1});
                                              throw std::runtime_error("writer failed");
                                            }),
                    std::runtime_error);
  BOOST_TEST(dir.listing() == std::vector<std::string>{"r.h5"});  // no r.h5.tmp.<host>.<pid>
  std::ifstream f(p);
  std::string s;
  f >> s;
  BOOST_TEST(s == "old");
}

BOOST_AUTO_TEST_CASE(hdf5_file_is_closed_before_the_rename) {
  ScratchDir dir;
  const std::string p = dir.path("r.h5");
  io::write_h5_atomically(p, [](hid_t f) { h5::write_attr(f, "x", int64_t{42}); });
  // Readable at once: the file was flushed and closed under its temporary name.
  const h5::Handle f = h5::open_file(p);
  BOOST_TEST(h5::attr_int64(f.get(), "x") == 42);
  BOOST_TEST(dir.listing() == std::vector<std::string>{"r.h5"});
}

BOOST_AUTO_TEST_CASE(bad_destinations_are_named) {
  ScratchDir dir;
  expect_input_error([&] { io::write_text_file(dir.path("no/such/dir/a.txt"), "x"); },
                     {"no/such/dir/a.txt", "directory", "does not exist"});
  expect_input_error([&] { io::write_text_file(dir.dir.string(), "x"); },
                     {dir.dir.string(), "is a directory"});
  expect_input_error([&] { io::write_text_file("", "x"); }, {"output path is empty"});
  BOOST_TEST(dir.listing().empty());
}

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/*! Runs `child` in a forked process and returns its wait status: limits, signal dispositions
 *  and HDF5's exit handlers stay out of the test process. */
template <typename F>
int in_child(F&& child) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

/*! The temporary name of `path` for a process that no longer runs (pids stop below 2^22). */
std::string dead_temporary(const std::string& path) {
  const std::string mine = io::temporary_name(path);
  return mine.substr(0, mine.rfind('.') + 1) + "999999999";
}

}  // namespace

BOOST_AUTO_TEST_CASE(temporary_names_carry_host_and_pid) {
  const std::string t = io::temporary_name("dir/r.h5");
  BOOST_TEST(t.rfind("dir/r.h5.tmp.", 0) == 0u, t);
  BOOST_TEST(t.substr(t.rfind('.') + 1) == std::to_string(::getpid()));
}

// A write past the file-size limit (ulimit -f) fails with a WriteError naming the file,
// keeps the old file, leaves no temporary and exits normally (HDF5 used to crash at exit on
// the file whose close had failed).
BOOST_AUTO_TEST_CASE(write_past_the_file_size_limit_keeps_the_old_file) {
  ScratchDir dir;
  const std::string p = dir.path("r.h5");
  io::write_text_file(p, "old");
  const int status = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);  // as install_signal_cleanup: the write fails with EFBIG
    const rlimit lim{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      io::write_h5_atomically(
          p, [](hid_t f) { h5::write(f, "big", std::vector<double>(100000, 1.0)); });
    } catch (const io::WriteError& e) {
      const std::string what = e.what();
      return what.find("File too large") != std::string::npos && what.find(p) == 0 ? 0 : 3;
    }
    return 2;
  });
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "wait status " << status);
  BOOST_TEST(slurp(p) == "old");
  BOOST_TEST(dir.listing() == std::vector<std::string>{"r.h5"});
}

// SIGTERM while a temporary is being written: the handler removes it and the process dies
// of the signal.
BOOST_AUTO_TEST_CASE(a_signal_removes_the_temporaries_being_written) {
  ScratchDir dir;
  const std::string p = dir.path("r.txt");
  io::write_text_file(p, "old");
  const int status = in_child([&] {
    io::install_signal_cleanup();
    io::Temporary t(p);
    std::ofstream(t.path()) << "half";
    std::raise(SIGTERM);
    return 0;
  });
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM), "wait status " << status);
  BOOST_TEST(slurp(p) == "old");
  BOOST_TEST(dir.listing() == std::vector<std::string>{"r.txt"});
}

BOOST_AUTO_TEST_CASE(stale_temporaries_are_removed_live_and_foreign_ones_kept) {
  ScratchDir dir;
  const std::string p = dir.path("r.h5");
  const std::string dead = dead_temporary(p), live = io::temporary_name(p);
  const std::string foreign = p + ".tmp.some-other-host.999999999";
  const std::string other = dead_temporary(dir.path("s.h5"));
  for (const auto& f : {dead, live, foreign, other}) std::ofstream(f) << "partial";
  BOOST_TEST(io::remove_stale_temporaries(p) == 1);  // only r.h5's dead one
  BOOST_TEST(!std::filesystem::exists(dead));
  BOOST_TEST(std::filesystem::exists(other));
  BOOST_TEST(io::remove_stale_temporaries_in(dir.dir.string()) == 1);  // s.h5's
  BOOST_TEST(!std::filesystem::exists(other));
  BOOST_TEST(std::filesystem::exists(live));
  BOOST_TEST(std::filesystem::exists(foreign));
  // Writing r.h5 cleans its own stale temporaries first.
  std::ofstream(dead) << "partial";
  io::write_text_file(p, "new");
  BOOST_TEST(!std::filesystem::exists(dead));
}

BOOST_AUTO_TEST_CASE(outputs_that_are_inputs_are_refused) {
  namespace fs = std::filesystem;
  ScratchDir dir;
  const std::string in = dir.path("in.h5"), out = dir.path("out.h5");
  io::write_text_file(in, "input");
  BOOST_CHECK_NO_THROW(io::refuse_if_same_file(out, {in, ""}));
  expect_input_error([&] { io::refuse_if_same_file(in, {in}); }, {in, "the same file"});
  fs::create_directories(dir.dir / "sub");
  expect_input_error([&] { io::refuse_if_same_file(dir.path("sub/../in.h5"), {in}); },
                     {"the same file"});
  fs::create_hard_link(in, dir.dir / "hard.h5");
  expect_input_error([&] { io::refuse_if_same_file(dir.path("hard.h5"), {in}); },
                     {"hard.h5", "the same file"});
  fs::create_symlink(in, dir.dir / "soft.h5");
  expect_input_error([&] { io::refuse_if_same_file(in, {dir.path("soft.h5")}); },
                     {"the same file"});
  BOOST_TEST(slurp(in) == "input");
}

BOOST_AUTO_TEST_CASE(outputs_are_checked_before_the_work) {
  ScratchDir dir;
  BOOST_CHECK_NO_THROW(io::check_output(dir.path("a.h5"), "--out"));
  expect_input_error([&] { io::check_output(dir.path("no/a.h5"), "--out"); },
                     {"--out", "no/a.h5", "does not exist"});
  expect_input_error([&] { io::check_output(dir.dir.string(), "--out"); },
                     {"--out", "is a directory"});
  io::write_text_file(dir.path("f"), "x");
  expect_input_error([&] { io::check_output(dir.path("f/a.h5"), "--csv"); },
                     {"--csv", "does not exist"});
  BOOST_TEST(dir.listing() == std::vector<std::string>{"f"});  // the probe is gone
}

// A failure of the write itself (here: the temporary name is taken by a directory) is a
// WriteError, which programs report with their own exit status (docs/cli.md).
BOOST_AUTO_TEST_CASE(failed_writes_are_write_errors) {
  ScratchDir dir;
  const std::string p = dir.path("r.txt");
  io::write_text_file(p, "old");
  std::filesystem::create_directories(io::temporary_name(p));
  BOOST_CHECK_THROW(io::write_text_file(p, "new"), io::WriteError);
  BOOST_TEST(slurp(p) == "old");
}

BOOST_AUTO_TEST_SUITE_END()
