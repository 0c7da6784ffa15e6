// The one atomic writer (reference/src/io/atomic_file.cpp): the destination appears only
// complete, a failure leaves no file behind and names the destination.
#include <boost/test/unit_test.hpp>

#include "io_fixture.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"

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
  BOOST_TEST(dir.listing() == std::vector<std::string>{"r.h5"});  // no r.h5.tmp.<pid>
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

BOOST_AUTO_TEST_SUITE_END()
