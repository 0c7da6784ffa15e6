/*! \file h5.cpp
 *  \brief The shared HDF5 layer (mac::h5): see h5.hpp.
 */
#include "mac/io/h5.hpp"

#include "mac/ref/common.hpp"

#include <algorithm>
#include <filesystem>

namespace mac::h5 {
namespace {

/*! \brief File type and native memory type of T. */
template <typename T>
struct Type;
template <>
struct Type<float> {
  static hid_t file() { return H5T_IEEE_F32LE; }
  static hid_t mem() { return H5T_NATIVE_FLOAT; }
};
template <>
struct Type<double> {
  static hid_t file() { return H5T_IEEE_F64LE; }
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
};
template <>
struct Type<int64_t> {
  static hid_t file() { return H5T_STD_I64LE; }
  static hid_t mem() { return H5T_NATIVE_INT64; }
};
template <>
struct Type<int8_t> {
  static hid_t file() { return H5T_STD_I8LE; }
  static hid_t mem() { return H5T_NATIVE_INT8; }
};
template <>
struct Type<uint8_t> {
  static hid_t file() { return H5T_STD_U8LE; }
  static hid_t mem() { return H5T_NATIVE_UINT8; }
};
template <>
struct Type<uint16_t> {  // raw BF16 bits (mac-verify's file protocol)
  static hid_t file() { return H5T_STD_U16LE; }
  static hid_t mem() { return H5T_NATIVE_UINT16; }
};
template <>
struct Type<int32_t> {
  static hid_t file() { return H5T_STD_I32LE; }
  static hid_t mem() { return H5T_NATIVE_INT32; }
};

/*! \brief Throws "<file>: <what...>" unless the HDF5 status or identifier is non-negative. */
template <typename S, typename... Args>
S check(S status, hid_t loc, const Args&... what) {
  if (status < 0) throw InputError(msg(file_name(loc), ": ", what...));
  return status;
}

/*! \brief A string type of the given storage; `width` is the fixed length (≥ 1). */
Handle string_type(Str s, size_t width) {
  Handle t(H5Tcopy(H5T_C_S1));
  if (s == Str::kFixed) {
    H5Tset_size(t.get(), std::max<size_t>(1, width));
    H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  } else {
    H5Tset_size(t.get(), H5T_VARIABLE);
    if (s == Str::kVariableUtf8) H5Tset_cset(t.get(), H5T_CSET_UTF8);
  }
  return t;
}

void write_attr_raw(hid_t loc, const std::string& name, hid_t ftype, hid_t mtype,
                    const void* data) {
  silence();
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(H5Acreate2(loc, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  check(a.get(), loc, "attribute '", name, "': cannot create");
  check(H5Awrite(a.get(), mtype, data), loc, "attribute '", name, "': cannot write");
}

/*! \brief Opens attribute `name` and checks it is one element of class `cls` (or `cls2`). */
Handle open_attr(hid_t loc, const std::string& name, H5T_class_t cls, const char* kind,
                 H5T_class_t cls2 = H5T_NO_CLASS) {
  require(has_attr(loc, name), file_name(loc), ": attribute '", name, "' is missing");
  Handle a(H5Aopen(loc, name.c_str(), H5P_DEFAULT));
  check(a.get(), loc, "attribute '", name, "': cannot open");
  Handle space(H5Aget_space(a.get()));
  require(H5Sget_simple_extent_npoints(space.get()) == 1, file_name(loc), ": attribute '", name,
          "' must be a scalar");
  Handle type(H5Aget_type(a.get()));
  const H5T_class_t c = H5Tget_class(type.get());
  require(c == cls || (cls2 != H5T_NO_CLASS && c == cls2), file_name(loc), ": attribute '", name,
          "' must be ", kind);
  return a;
}

hsize_t product(const std::vector<hsize_t>& dims) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  return n;
}

/*! \brief Elements of `rows` rows of a dataset of shape `dims`, checked against
 *  mac::max_elements() before anything is allocated (a file may declare any shape: a
 *  chunked dataset never written costs a few bytes whatever its dimensions). */
int64_t checked_elements(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
                         hsize_t rows) {
  std::vector<hsize_t> shape = dims;
  if (!shape.empty()) shape[0] = rows;
  const int64_t limit = max_elements();
  int64_t n = 1;
  for (const hsize_t d : shape) {
    const bool over =
        d > static_cast<hsize_t>(limit) || (d != 0 && n > limit / static_cast<int64_t>(d));
    require(!over, file_name(loc), ": dataset '", name, "' of shape ", shape_str(dims),
            " has more than ", limit, " elements (the limit of one array)");
    n *= static_cast<int64_t>(d);
  }
  return n;
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
  id_ = H5I_INVALID_HID;
}

void silence() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string file_name(hid_t loc) {
  const ssize_t n = H5Fget_name(loc, nullptr, 0);
  if (n <= 0) return "(HDF5 file)";
  std::string s(static_cast<size_t>(n) + 1, '\0');
  H5Fget_name(loc, s.data(), s.size());
  s.resize(static_cast<size_t>(n));
  return s;
}

std::string shape_str(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Handle create_file(const std::string& path) {
  silence();
  Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  require(f.valid(), path, ": cannot create HDF5 file");
  return f;
}

Handle open_file(const std::string& path) {
  namespace fs = std::filesystem;
  silence();
  std::error_code ec;
  require(fs::exists(path, ec), path, ": no such file");
  require(!fs::is_directory(path, ec), path, ": is a directory, not an HDF5 file");
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  require(is_h5 > 0, path, is_h5 == 0 ? ": not an HDF5 file" : ": cannot be read");
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  require(f.valid(), path, ": cannot open HDF5 file");
  return f;
}

Handle create_group(hid_t loc, const std::string& name) {
  silence();
  Handle g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  check(g.get(), loc, "group '", name, "': cannot create");
  return g;
}

Handle open_group(hid_t loc, const std::string& name) {
  silence();
  require(exists(loc, name), file_name(loc), ": group '", name, "' is missing");
  Handle g(H5Gopen2(loc, name.c_str(), H5P_DEFAULT));
  require(g.valid(), file_name(loc), ": '", name, "' is not a group");
  return g;
}

std::string first_missing(hid_t loc, const std::string& name) {
  silence();
  for (size_t pos = name.empty() || name[0] != '/' ? 0 : 1;;) {
    const size_t next = name.find('/', pos);
    const std::string prefix = name.substr(0, next);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return prefix.empty() ? name : prefix;
    if (next == std::string::npos) return "";
    pos = next + 1;
  }
}

void write_attr(hid_t loc, const std::string& name, const std::string& v, Str s) {
  Handle type = string_type(s, v.size());
  if (s == Str::kFixed) {
    const std::string buf = v.empty() ? std::string(1, '\0') : v;
    write_attr_raw(loc, name, type.get(), type.get(), buf.data());
  } else {
    const char* p = v.c_str();
    write_attr_raw(loc, name, type.get(), type.get(), &p);
  }
}

void write_attr(hid_t loc, const std::string& name, double v) {
  write_attr_raw(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

void write_attr(hid_t loc, const std::string& name, int64_t v) {
  write_attr_raw(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

bool has_attr(hid_t loc, const std::string& name) {
  silence();
  return H5Aexists(loc, name.c_str()) > 0;
}

std::string attr_string(hid_t loc, const std::string& name) {
  Handle a = open_attr(loc, name, H5T_STRING, "a string");
  Handle ftype(H5Aget_type(a.get()));
  if (H5Tis_variable_str(ftype.get()) > 0) {
    Handle mtype(H5Tcopy(H5T_C_S1));
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
    char* p = nullptr;
    check(H5Aread(a.get(), mtype.get(), &p), loc, "attribute '", name, "': cannot read");
    std::string s = p ? p : "";
    if (p) H5free_memory(p);
    return s;
  }
  // One byte more than stored, NUL-terminated: a fully used fixed string keeps its last character.
  const size_t n = H5Tget_size(ftype.get());
  constexpr size_t kMaxAttrString = size_t{1} << 20;  // names and provenance, not data
  require(n <= kMaxAttrString, file_name(loc), ": attribute '", name, "' is a string of ", n,
          " bytes, more than ", kMaxAttrString);
  Handle mtype(H5Tcopy(H5T_C_S1));
  H5Tset_size(mtype.get(), n + 1);
  H5Tset_strpad(mtype.get(), H5T_STR_NULLTERM);
  H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
  std::string buf(n + 1, '\0');
  check(H5Aread(a.get(), mtype.get(), buf.data()), loc, "attribute '", name, "': cannot read");
  buf.resize(std::char_traits<char>::length(buf.c_str()));
  return buf;
}

double attr_double(hid_t loc, const std::string& name) {
  // An integer (e.g. rope_theta = 10000 written by a script) converts exactly enough.
  Handle a = open_attr(loc, name, H5T_FLOAT, "a number", H5T_INTEGER);
  double v = 0;
  check(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), loc, "attribute '", name, "': cannot read");
  return v;
}

int64_t attr_int64(hid_t loc, const std::string& name) {
  Handle a = open_attr(loc, name, H5T_INTEGER, "an integer");
  int64_t v = 0;
  check(H5Aread(a.get(), H5T_NATIVE_INT64, &v), loc, "attribute '", name, "': cannot read");
  return v;
}

template <typename T>
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
           const std::vector<T>& v, const Layout& layout) {
  silence();
  const hsize_t n = product(dims);
  require(n == v.size(), file_name(loc), ": dataset '", name, "': ", v.size(), " values for shape ",
          shape_str(dims));
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  check(space.get(), loc, "dataset '", name, "': cannot create dataspace");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (layout.chunk_elements > 0 && !dims.empty() &&
      n >= std::max<hsize_t>(1, layout.min_elements)) {
    std::vector<hsize_t> chunk = dims;
    const hsize_t row = n / dims[0];
    chunk[0] = std::min(dims[0], std::max<hsize_t>(1, layout.chunk_elements / row));
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), loc, "dataset '",
          name, "': cannot set chunking");
    check(H5Pset_shuffle(dcpl.get()), loc, "dataset '", name, "': cannot set shuffle filter");
    check(H5Pset_deflate(dcpl.get(), layout.deflate), loc, "dataset '", name,
          "': cannot set gzip filter");
  }
  Handle ds(H5Dcreate2(loc, name.c_str(), Type<T>::file(), space.get(), H5P_DEFAULT, dcpl.get(),
                       H5P_DEFAULT));
  check(ds.get(), loc, "dataset '", name, "': cannot create");
  if (n > 0)
    check(H5Dwrite(ds.get(), Type<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), loc,
          "dataset '", name, "': cannot write");
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v, Str s) {
  silence();
  size_t width = 1;
  for (const auto& x : v) width = std::max(width, x.size());
  Handle type = string_type(s, width);
  const hsize_t n = v.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  Handle ds(H5Dcreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT));
  check(ds.get(), loc, "dataset '", name, "': cannot create");
  if (n == 0) return;
  herr_t rc;
  if (s == Str::kFixed) {
    std::string buf(width * v.size(), '\0');
    for (size_t i = 0; i < v.size(); ++i) buf.replace(i * width, v[i].size(), v[i]);
    rc = H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  } else {
    std::vector<const char*> p;
    for (const auto& x : v) p.push_back(x.c_str());
    rc = H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
  }
  check(rc, loc, "dataset '", name, "': cannot write");
}

Dataset open_dataset(hid_t loc, const std::string& name) {
  const std::string miss = first_missing(loc, name);
  require(miss.empty(), file_name(loc), ": dataset '", name, "' is missing",
          miss == name ? "" : msg(" (no ", miss, ")"));
  Dataset d;
  d.name = name;
  d.id = Handle(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  require(d.id.valid(), file_name(loc), ": '", name, "' is not a dataset");
  Handle type(H5Dget_type(d.id.get()));
  d.type_class = H5Tget_class(type.get());
  d.type_size = H5Tget_size(type.get());
  Handle space(H5Dget_space(d.id.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check(rank, loc, "dataset '", name, "': bad dataspace");
  d.dims.assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.get(), d.dims.data(), nullptr);
  return d;
}

template <typename T>
std::vector<T> read_rows(const Dataset& ds, hsize_t rows) {
  const hid_t id = ds.id.get();
  require(!ds.dims.empty() && rows <= ds.dims[0], file_name(id), ": dataset '", ds.name,
          "': cannot read ", rows, " rows of shape ", shape_str(ds.dims));
  const int64_t n = checked_elements(id, ds.name, ds.dims, rows);
  std::vector<T> out(static_cast<size_t>(n), T{});
  if (n == 0) return out;
  std::vector<hsize_t> start(ds.dims.size(), 0), count = ds.dims;
  count[0] = rows;
  Handle fspace(H5Dget_space(id));
  check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        id, "dataset '", ds.name, "': cannot select rows");
  Handle mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
  check(H5Dread(id, Type<T>::mem(), mspace.get(), fspace.get(), H5P_DEFAULT, out.data()), id,
        "dataset '", ds.name, "': cannot read");
  return out;
}

template <typename T>
std::vector<T> read(hid_t loc, const std::string& name, int64_t expect) {
  const Dataset ds = open_dataset(loc, name);
  const int64_t n = checked_elements(loc, name, ds.dims, ds.dims.empty() ? 0 : ds.dims[0]);
  require(expect < 0 || n == expect, file_name(loc), ": dataset '", name, "' has ", n,
          " elements, expected ", expect);
  std::vector<T> v(static_cast<size_t>(n));
  if (n > 0)
    check(H5Dread(ds.id.get(), Type<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), loc,
          "dataset '", name, "': cannot read");
  return v;
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  const Dataset ds = open_dataset(loc, name);
  require(ds.type_class == H5T_STRING && ds.dims.size() == 1, file_name(loc), ": dataset '", name,
          "' must be a 1-D string dataset");
  checked_elements(loc, name, ds.dims, ds.dims[0]);
  Handle type = string_type(Str::kVariable, 0);
  Handle space(H5Dget_space(ds.id.get()));
  std::vector<char*> p(static_cast<size_t>(ds.dims[0]), nullptr);
  if (!p.empty())
    check(H5Dread(ds.id.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), loc,
          "dataset '", name, "': cannot read");
  std::vector<std::string> out;
  for (char* x : p) out.emplace_back(x ? x : "");
  if (!p.empty()) H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, p.data());
  return out;
}

#define MAC_H5_INSTANTIATE(T)                                                    \
  template void write<T>(hid_t, const std::string&, const std::vector<hsize_t>&, \
                         const std::vector<T>&, const Layout&);                  \
  template std::vector<T> read_rows<T>(const Dataset&, hsize_t);                 \
  template std::vector<T> read<T>(hid_t, const std::string&, int64_t);
MAC_H5_INSTANTIATE(float)
MAC_H5_INSTANTIATE(double)
MAC_H5_INSTANTIATE(int64_t)
MAC_H5_INSTANTIATE(int8_t)
MAC_H5_INSTANTIATE(uint8_t)
MAC_H5_INSTANTIATE(uint16_t)
MAC_H5_INSTANTIATE(int32_t)
#undef MAC_H5_INSTANTIATE

}  // namespace mac::h5
