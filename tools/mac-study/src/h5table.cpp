#include "h5table.hpp"

#include "mac/ref/common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mac::study::h5 {

namespace {

void check(herr_t rc, const std::string& what) { require(rc >= 0, "HDF5: ", what, " failed"); }

hid_t checked(hid_t id, const std::string& what) {
  require(id >= 0, "HDF5: ", what, " failed");
  return id;
}

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

template <typename T>
void write_impl(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const T* data, hid_t mem,
                hid_t file_type) {
  quiet();
  Handle space(checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "dataspace " + name));
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (n >= 4096 && !dims.empty()) {
    // Chunks of whole rows along the first dimension, about 64K elements each.
    std::vector<hsize_t> chunk = dims;
    hsize_t row = n / dims[0];
    hsize_t rows = row > 0 ? std::max<hsize_t>(1, 65536 / row) : 1;
    chunk[0] = std::min(dims[0], rows);
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), "chunk " + name);
    check(H5Pset_shuffle(dcpl.get()), "shuffle " + name);
    check(H5Pset_deflate(dcpl.get(), 1), "deflate " + name);
  }
  Handle ds(checked(H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                    "create dataset " + name));
  if (n > 0) check(H5Dwrite(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write " + name);
}

template <typename T>
std::vector<T> read_impl(hid_t loc, const std::string& name, int64_t expect, hid_t mem) {
  quiet();
  Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  require(ds.valid(), "dataset '", name, "' is missing");
  Handle space(H5Dget_space(ds.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  require(n >= 0, "dataset '", name, "': bad dataspace");
  require(expect < 0 || n == expect, "dataset '", name, "' has ", static_cast<int64_t>(n), " elements, expected ",
          expect);
  std::vector<T> v(static_cast<size_t>(n));
  if (n > 0) check(H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "read " + name);
  return v;
}

}  // namespace

void Handle::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  id_ = -1;
}

Handle create_file(const std::string& path) {
  quiet();
  return Handle(checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file " + path));
}

Handle open_file(const std::string& path) {
  quiet();
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
}

Handle create_group(hid_t loc, const std::string& name) {
  quiet();
  return Handle(checked(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group " + name));
}

Handle open_group(hid_t loc, const std::string& name) {
  quiet();
  return Handle(H5Gopen2(loc, name.c_str(), H5P_DEFAULT));
}

void attr(hid_t loc, const std::string& name, const std::string& v) {
  quiet();
  Handle type(H5Tcopy(H5T_C_S1));
  check(H5Tset_size(type.get(), v.empty() ? 1 : v.size()), "string type");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "string pad");
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(checked(H5Acreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), "attr " + name));
  const std::string buf = v.empty() ? std::string(1, '\0') : v;
  check(H5Awrite(a.get(), type.get(), buf.data()), "write attr " + name);
}

void attr(hid_t loc, const std::string& name, double v) {
  quiet();
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(checked(H5Acreate2(loc, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   "attr " + name));
  check(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &v), "write attr " + name);
}

void attr(hid_t loc, const std::string& name, int64_t v) {
  quiet();
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(checked(H5Acreate2(loc, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   "attr " + name));
  check(H5Awrite(a.get(), H5T_NATIVE_INT64, &v), "write attr " + name);
}

bool has_attr(hid_t loc, const std::string& name) {
  quiet();
  return H5Aexists(loc, name.c_str()) > 0;
}

std::string attr_str(hid_t loc, const std::string& name) {
  quiet();
  require(has_attr(loc, name), "attribute '", name, "' is missing");
  Handle a(H5Aopen(loc, name.c_str(), H5P_DEFAULT));
  Handle ftype(H5Aget_type(a.get()));
  require(H5Tget_class(ftype.get()) == H5T_STRING, "attribute '", name, "' is not a string");
  require(H5Tis_variable_str(ftype.get()) <= 0, "attribute '", name, "' is a variable-length string");
  const size_t n = H5Tget_size(ftype.get());
  Handle mtype(H5Tcopy(H5T_C_S1));
  H5Tset_size(mtype.get(), n);
  H5Tset_strpad(mtype.get(), H5T_STR_NULLPAD);  // NULLTERM would drop the last character
  std::string s(n, '\0');
  check(H5Aread(a.get(), mtype.get(), s.data()), "read attr " + name);
  const auto z = s.find('\0');
  if (z != std::string::npos) s.resize(z);
  return s;
}

namespace {
/*! \brief A scalar attribute read as the native type `mem_type`. */
template <typename T>
T read_scalar_attr(hid_t loc, const std::string& name, hid_t mem_type) {
  quiet();
  require(has_attr(loc, name), "attribute '", name, "' is missing");
  Handle a(H5Aopen(loc, name.c_str(), H5P_DEFAULT));
  T v{};
  check(H5Aread(a.get(), mem_type, &v), "read attr " + name);
  return v;
}
}  // namespace

double attr_f64(hid_t loc, const std::string& name) { return read_scalar_attr<double>(loc, name, H5T_NATIVE_DOUBLE); }

int64_t attr_i64(hid_t loc, const std::string& name) { return read_scalar_attr<int64_t>(loc, name, H5T_NATIVE_INT64); }

void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const double* data) {
  write_impl(loc, name, dims, data, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
}
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const int64_t* data) {
  write_impl(loc, name, dims, data, H5T_NATIVE_INT64, H5T_STD_I64LE);
}
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, const int8_t* data) {
  write_impl(loc, name, dims, data, H5T_NATIVE_INT8, H5T_STD_I8LE);
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v) {
  quiet();
  size_t w = 1;
  for (const auto& s : v) w = std::max(w, s.size());
  std::string buf(w * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) buf.replace(i * w, v[i].size(), v[i]);
  Handle type(H5Tcopy(H5T_C_S1));
  check(H5Tset_size(type.get(), w), "string type");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "string pad");
  const hsize_t n = v.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  Handle ds(checked(H5Dcreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    "create dataset " + name));
  if (n > 0) check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "write " + name);
}

std::vector<double> read_f64(hid_t loc, const std::string& name, int64_t expect) {
  return read_impl<double>(loc, name, expect, H5T_NATIVE_DOUBLE);
}
std::vector<int64_t> read_i64(hid_t loc, const std::string& name, int64_t expect) {
  return read_impl<int64_t>(loc, name, expect, H5T_NATIVE_INT64);
}
std::vector<int8_t> read_i8(hid_t loc, const std::string& name, int64_t expect) {
  return read_impl<int8_t>(loc, name, expect, H5T_NATIVE_INT8);
}

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string fmt(int64_t v) { return std::to_string(v); }

namespace {
bool numeric(const std::string& s, double& out) {
  if (s == "nan") {
    out = std::nan("");
    return true;
  }
  if (s == "inf" || s == "-inf") {
    out = s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0';
}
}  // namespace

std::string Table::csv() const {
  std::ostringstream os;
  for (size_t c = 0; c < columns.size(); ++c) os << (c ? "," : "") << columns[c];
  os << "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      const bool quote = r[c].find_first_of(",\"") != std::string::npos;
      if (c) os << ",";
      if (quote) {
        os << '"';
        for (char ch : r[c]) os << (ch == '"' ? "\"\"" : std::string(1, ch));
        os << '"';
      } else {
        os << r[c];
      }
    }
    os << "\n";
  }
  return os.str();
}

void Table::write_group(hid_t file, const std::string& group) const {
  Handle g = create_group(file, group);
  attr(g.get(), "rows", static_cast<int64_t>(rows.size()));
  std::string cols;
  for (size_t c = 0; c < columns.size(); ++c) cols += (c ? "," : "") + columns[c];
  attr(g.get(), "columns", cols);
  for (size_t c = 0; c < columns.size(); ++c) {
    std::vector<double> num(rows.size());
    bool all_num = true;
    for (size_t i = 0; i < rows.size() && all_num; ++i) all_num = numeric(rows[i][c], num[i]);
    if (all_num) {
      write(g.get(), columns[c], {static_cast<hsize_t>(rows.size())}, num.data());
    } else {
      std::vector<std::string> s(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) s[i] = rows[i][c];
      write_strings(g.get(), columns[c], s);
    }
  }
}

}  // namespace mac::study::h5
