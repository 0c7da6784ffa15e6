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

/*! \brief A table of formatted cells; numeric columns are those whose every cell parses as
 *  a number (written to HDF5 as float64), the others are written as fixed-length strings. */
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  std::string csv() const;
  void write_group(hid_t file, const std::string& group) const;
};

std::string fmt(double v);  //!< %.6g, "nan"/"inf" for non-finite
std::string fmt(int64_t v);

}  // namespace mac::study
