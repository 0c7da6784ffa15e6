// reference/src/io/h5.cpp: the HDF5 layer every file kind is written and read through.
// Round trips must be bit-exact in the stored little-endian types; every failure must be one
// InputError naming the file and the attribute or dataset.
#include "io_fixture.hpp"
#include "mac/io/h5.hpp"

#include <cmath>
#include <filesystem>
#include <limits>

using namespace mac;
using mac::test::expect_input_error;
using mac::test::ScratchDir;

BOOST_AUTO_TEST_SUITE(h5_layer)

BOOST_AUTO_TEST_CASE(attributes_round_trip_in_every_string_form) {
  ScratchDir dir;
  const std::string p = dir.path("a.h5");
  {
    const h5::Handle f = h5::create_file(p);
    h5::write_attr(f.get(), "fixed", std::string("fixed text"), h5::Str::kFixed);
    h5::write_attr(f.get(), "var", std::string("variable"), h5::Str::kVariable);
    h5::write_attr(f.get(), "utf8", std::string("τ = 0.45"), h5::Str::kVariableUtf8);
    h5::write_attr(f.get(), "empty", std::string(), h5::Str::kFixed);
    h5::write_attr(f.get(), "i", int64_t{-(int64_t{1} << 60)});
    h5::write_attr(f.get(), "d", -0.1);
  }
  const h5::Handle f = h5::open_file(p);
  BOOST_TEST(h5::attr_string(f.get(), "fixed") == "fixed text");
  BOOST_TEST(h5::attr_string(f.get(), "var") == "variable");
  BOOST_TEST(h5::attr_string(f.get(), "utf8") == "τ = 0.45");
  BOOST_TEST(h5::attr_string(f.get(), "empty") == "");
  BOOST_TEST(h5::attr_int64(f.get(), "i") == -(int64_t{1} << 60));
  BOOST_TEST(h5::attr_double(f.get(), "d") == -0.1);                  // bit-exact float64
  BOOST_TEST(h5::attr_double(f.get(), "i") == -std::ldexp(1.0, 60));  // integers read as double
  BOOST_TEST(h5::has_attr(f.get(), "d"));
  BOOST_TEST(!h5::has_attr(f.get(), "nope"));
  expect_input_error([&] { h5::attr_int64(f.get(), "nope"); }, {"a.h5", "nope"});
  expect_input_error([&] { h5::attr_int64(f.get(), "d"); }, {"a.h5", "d"});
  expect_input_error([&] { h5::attr_string(f.get(), "i"); }, {"a.h5", "i"});
}

BOOST_AUTO_TEST_CASE(datasets_round_trip_bit_exact_contiguous_and_chunked) {
  ScratchDir dir;
  const std::string p = dir.path("d.h5");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> dv{1.0 / 3, -0.0, nan, std::numeric_limits<double>::infinity(),
                               1e-310,  7};
  const std::vector<int8_t> bv{-128, 127, 0, 1, -1, 5};
  const std::vector<int64_t> iv{std::numeric_limits<int64_t>::min(), 0, 1, 2, 3,
                                std::numeric_limits<int64_t>::max()};
  const std::vector<float> fv{1.5f, -2.25f, std::numeric_limits<float>::denorm_min(), 0, 0, 1};
  {
    const h5::Handle f = h5::create_file(p);
    const h5::Handle g = h5::create_group(f.get(), "g");
    h5::write(g.get(), "d", {2, 3}, dv);
    h5::write(f.get(), "b", {3, 2}, bv, h5::Layout{2, 1, 4});  // chunked + deflate
    h5::write(f.get(), "i", iv);
    h5::write(f.get(), "f", {6}, fv, h5::Layout{4, 1, 1});
    h5::write_strings(f.get(), "s", {"a", "bb", ""}, h5::Str::kVariable);
  }
  const h5::Handle f = h5::open_file(p);
  const auto d = h5::read<double>(f.get(), "g/d", 6);
  BOOST_TEST(std::memcmp(d.data(), dv.data(), sizeof(double) * 6) == 0);
  BOOST_TEST(h5::read<int8_t>(f.get(), "b") == bv, boost::test_tools::per_element());
  BOOST_TEST(h5::read<int64_t>(f.get(), "i") == iv, boost::test_tools::per_element());
  const auto fr = h5::read<float>(f.get(), "f");
  BOOST_TEST(std::memcmp(fr.data(), fv.data(), sizeof(float) * 6) == 0);
  BOOST_TEST((h5::read_strings(f.get(), "s") == std::vector<std::string>{"a", "bb", ""}));
  const h5::Dataset ds = h5::open_dataset(f.get(), "g/d");
  BOOST_TEST((ds.dims == std::vector<hsize_t>{2, 3}));
  BOOST_TEST(ds.type_class == H5T_FLOAT);
  BOOST_TEST(ds.type_size == 8u);
  const auto row0 = h5::read_rows<double>(ds, 1);  // the first row only
  BOOST_TEST(row0.size() == 3u);
  BOOST_TEST(row0[0] == dv[0]);
  BOOST_TEST(h5::shape_str(ds.dims) == "[2, 3]");
}

BOOST_AUTO_TEST_CASE(missing_and_mis_sized_data_are_named) {
  ScratchDir dir;
  const std::string p = dir.path("m.h5");
  {
    const h5::Handle f = h5::create_file(p);
    h5::write(f.get(), "x", std::vector<double>{1, 2, 3});
    h5::create_group(f.get(), "grp");
  }
  const h5::Handle f = h5::open_file(p);
  expect_input_error([&] { h5::read<double>(f.get(), "x", 4); }, {"m.h5", "x", "3", "4"});
  expect_input_error([&] { h5::open_dataset(f.get(), "nope/x"); }, {"m.h5", "nope", "missing"});
  expect_input_error([&] { h5::open_dataset(f.get(), "grp"); }, {"m.h5", "grp", "not a dataset"});
  expect_input_error([&] { h5::open_group(f.get(), "x2"); }, {"m.h5", "x2", "missing"});
  BOOST_TEST(h5::first_missing(f.get(), "grp/a/b") == "grp/a");
  BOOST_TEST(h5::exists(f.get(), "grp"));
  expect_input_error(
      [&] {
        h5::write(f.get(), "bad", {2, 2}, std::vector<double>{1, 2, 3});
      },
      {"bad"});
}

BOOST_AUTO_TEST_CASE(files_that_are_not_hdf5_are_named) {
  ScratchDir dir;
  expect_input_error([&] { h5::open_file(dir.path("none.h5")); }, {"none.h5", "no such file"});
  expect_input_error([&] { h5::open_file(dir.path("")); }, {"is a directory"});
  const std::string junk = dir.path("junk.h5");
  std::FILE* fp = std::fopen(junk.c_str(), "wb");
  std::fputs("not hdf5 at all", fp);
  std::fclose(fp);
  expect_input_error([&] { h5::open_file(junk); }, {"junk.h5", "not an HDF5 file"});
}

// A dataset may declare any shape at the cost of a few bytes (chunked, never written): reads
// are checked against the element limit before anything is allocated, with no overflow of
// rows × row (2^58 × 256 wraps a 64-bit product to 0).
BOOST_AUTO_TEST_CASE(huge_declared_datasets_are_refused_before_allocation) {
  ScratchDir dir;
  const std::string p = dir.path("huge.h5");
  {
    const h5::Handle f = h5::create_file(p);
    const hsize_t dims[3] = {hsize_t{1} << 58, 4, 64}, chunk[3] = {1, 4, 64};
    h5::Handle space(H5Screate_simple(3, dims, nullptr));
    h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl.get(), 3, chunk);
    h5::Handle ds(H5Dcreate2(f.get(), "q", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(),
                             H5P_DEFAULT));
    BOOST_REQUIRE(ds.valid());
  }
  BOOST_TEST(std::filesystem::file_size(p) < 100000u);
  const h5::Handle f = h5::open_file(p);
  const h5::Dataset ds = h5::open_dataset(f.get(), "q");
  expect_input_error([&] { h5::read_rows<float>(ds, ds.dims[0]); },
                     {"huge.h5", "'q'", "[288230376151711744, 4, 64]", "68719476736"});
  expect_input_error([&] { h5::read<float>(f.get(), "q"); }, {"'q'", "68719476736"});
  BOOST_TEST(h5::read_rows<float>(ds, 2).size() == 2u * 4 * 64);  // a few rows are fine
}

BOOST_AUTO_TEST_SUITE_END()
