// test_h5table: mac-study's tables (tools/mac-study/src/h5table.cpp): numeric columns reach
// the HDF5 file as the numbers themselves, the CSV keeps its short text.
#include <boost/test/unit_test.hpp>

#include "h5table.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

namespace fs = std::filesystem;
using namespace mac;
using namespace mac::study;

BOOST_AUTO_TEST_SUITE(h5table)

BOOST_AUTO_TEST_CASE(numeric_columns_are_stored_unrounded) {
  const double third = 1.0 / 3.0, tiny = 1.234567890123e-300;
  const double inf = std::numeric_limits<double>::infinity();
  Table t;
  t.columns = {"x", "n", "label", "mixed"};
  t.add({fmt(third), fmt(int64_t{9007199254740993}), "a", "all"});
  t.add({fmt(tiny), fmt(int64_t{-4}), "b,c", fmt(int64_t{3})});
  t.add({fmt(-inf), fmt(int64_t{0}), "d", fmt(2.5)});

  // CSV: the %.6g text, quoted where it holds a comma.
  BOOST_TEST(t.csv() ==
             "x,n,label,mixed\n0.333333,9007199254740993,a,all\n"
             "1.23457e-300,-4,\"b,c\",3\n-inf,0,d,2.5\n");

  const fs::path path =
      fs::temp_directory_path() / ("mac_test_h5table_" + std::to_string(::getpid()) + ".h5");
  io::write_h5_atomically(path.string(), [&](hid_t f) { t.write_group(f, "t"); });
  {
    const h5::Handle f = h5::open_file(path.string());
    const auto x = h5::read<double>(f.get(), "t/x", 3);
    BOOST_TEST(x[0] == third);  // exact: the value, not its 6-digit text
    BOOST_TEST(x[1] == tiny);
    BOOST_TEST(x[2] == -inf);
    // Integers are float64 columns too (the schema of docs/study-format.md); 2^53 + 1 is
    // rounded once, by the conversion to double, not by a text round trip.
    const auto n = h5::read<double>(f.get(), "t/n", 3);
    BOOST_TEST(n[0] == static_cast<double>(int64_t{9007199254740993}));
    BOOST_TEST(n[1] == -4.0);
    // A column with any text cell is a string column, even if its other cells are numbers.
    BOOST_TEST(h5::open_dataset(f.get(), "t/label").type_class == H5T_STRING);
    BOOST_TEST(h5::open_dataset(f.get(), "t/mixed").type_class == H5T_STRING);
    BOOST_TEST(h5::attr_int64(h5::open_group(f.get(), "t").get(), "rows") == 3);
  }
  fs::remove(path);
}

BOOST_AUTO_TEST_SUITE_END()
