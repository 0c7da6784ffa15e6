#pragma once
/*! \file h5table.hpp
 *  \brief Small HDF5 (C API) helpers for mac-study files, and a string table written
 *         both as CSV and as an HDF5 group of column datasets.
 */
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mac::study::h5 {

/*! \brief Owns an HDF5 identifier and closes it with the right H5?close. */
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = -1;
    }
    return *this;
  }
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
};

Handle create_file(const std::string& path);
/*! \brief Opens read-only; invalid handle (no exception, no HDF5 error print) if it fails. */
Handle open_file(const std::string& path);
Handle create_group(hid_t loc, const std::string& name);
Handle open_group(hid_t loc, const std::string& name);

void attr(hid_t loc, const std::string& name, const std::string& v);
void attr(hid_t loc, const std::string& name, double v);
void attr(hid_t loc, const std::string& name, int64_t v);
bool has_attr(hid_t loc, const std::string& name);
std::string attr_str(hid_t loc, const std::string& name);
double attr_f64(hid_t loc, const std::string& name);
int64_t attr_i64(hid_t loc, const std::string& name);

/*! \brief Writes a dataset of shape dims (row-major); gzip level 1 + shuffle when large. */
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const double* data);
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const int64_t* data);
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const int8_t* data);
void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v);

/*! \brief Reads a whole dataset, checking its element count equals `expect` (if ≥ 0). */
std::vector<double> read_f64(hid_t loc, const std::string& name, int64_t expect = -1);
std::vector<int64_t> read_i64(hid_t loc, const std::string& name, int64_t expect = -1);
std::vector<int8_t> read_i8(hid_t loc, const std::string& name, int64_t expect = -1);

/*! \brief A table of formatted cells; numeric columns are those whose every cell parses as
 *  a number (written to HDF5 as float64), the others are written as strings. */
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  std::string csv() const;
  void write_group(hid_t file, const std::string& group) const;
};

std::string fmt(double v);   //!< %.6g, "nan"/"inf" for non-finite
std::string fmt(int64_t v);

}  // namespace mac::study::h5
