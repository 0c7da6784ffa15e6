#pragma once
/*! \file h5table.hpp
 *  \brief mac-study's dataset layout, and a string table written both as CSV and as an HDF5
 *         group of column datasets. The HDF5 layer itself is mac::h5 (mac/io/h5.hpp).
 */
#include "mac/io/h5.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::study {

/*! \brief Datasets of ≥ 4096 elements: chunks of whole rows of ≈ 64K elements, shuffle, deflate 1;
 *  smaller ones contiguous. */
inline constexpr h5::Layout kLayout{65536, 4096, 1};

/*! \brief One table cell: its CSV text and, for a number, its value. */
struct Cell {
  std::string text;                            //!< as written to the CSV
  double value = 0;                            //!< the number itself (meaningful iff `number`)
  bool number = false;                         //!< made by fmt(double) or fmt(int64_t)
  Cell(std::string s) : text(std::move(s)) {}  // NOLINT: strings are cells
  Cell(const char* s) : text(s) {}             // NOLINT
};

/*! \brief A table written both as CSV and as an HDF5 group of column datasets. A column
 *  whose every cell is a number is written as float64 from the numbers themselves (the
 *  CSV's rounded text plays no part); any other column as fixed-length strings. */
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  void add(std::vector<Cell> row) { rows.push_back(std::move(row)); }
  std::string csv() const;
  void write_group(hid_t file, const std::string& group) const;
};

Cell fmt(double v);   //!< a number; CSV text %.6g, "nan"/"inf"/"-inf" for non-finite
Cell fmt(int64_t v);  //!< a number; CSV text exact

}  // namespace mac::study
