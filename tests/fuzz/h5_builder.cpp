/*! \file h5_builder.cpp
 *  \brief The fuzzers' HDF5 line language (h5_builder.hpp).
 */
#include "h5_builder.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

namespace mac::fuzz {
namespace {

constexpr int kMaxItems = 256;             // lines turned into objects, per input (a report: ~100)
constexpr uint64_t kWrittenMax = 1 << 16;  // larger datasets stay unwritten (chunked)

hid_t type_of(const std::string& t) {
  if (t == "f32") return H5T_IEEE_F32LE;
  if (t == "f64") return H5T_IEEE_F64LE;
  if (t == "i8") return H5T_STD_I8LE;
  if (t == "i32") return H5T_STD_I32LE;
  if (t == "i64") return H5T_STD_I64LE;
  if (t == "u8") return H5T_STD_U8LE;
  return -1;
}

void attribute(hid_t root, const std::string& name, const std::string& kind, std::istream& in) {
  hid_t space = H5Screate(H5S_SCALAR);
  if (kind == "i") {
    int64_t v = 0;
    if (in >> v) {
      hid_t a = H5Acreate2(root, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) H5Awrite(a, H5T_NATIVE_INT64, &v), H5Aclose(a);
    }
  } else if (kind == "f") {
    std::string tok;
    if (in >> tok) {
      const double v = std::strtod(tok.c_str(), nullptr);
      hid_t a = H5Acreate2(root, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) H5Awrite(a, H5T_NATIVE_DOUBLE, &v), H5Aclose(a);
    }
  } else if (kind == "s") {
    std::string text;
    std::getline(in >> std::ws, text);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const char* p = text.c_str();
    hid_t a = H5Acreate2(root, name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) H5Awrite(a, t, &p), H5Aclose(a);
    H5Tclose(t);
  }
  H5Sclose(space);
}

void dataset(hid_t f, const std::string& path, const std::string& type, const std::string& shape,
             std::istream& in) {
  const hid_t t = type_of(type);
  if (t < 0) return;
  std::vector<hsize_t> dims;
  if (shape != "-") {
    std::stringstream ss(shape);
    for (std::string d; std::getline(ss, d, 'x');) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(d.c_str(), &end, 10);
      if (d.empty() || *end || v > (1ull << 62)) return;
      dims.push_back(v);
    }
  }
  if (dims.size() > 4) return;
  uint64_t n = 1;
  bool big = false;
  for (hsize_t d : dims) {
    if (d != 0 && n > kWrittenMax / d) big = true;
    n = big ? n : n * d;
  }
  hid_t space = dims.empty()
                    ? H5Screate(H5S_SCALAR)
                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (big) {  // chunks of one row of dim 0, capped; never written
    std::vector<hsize_t> chunk(dims.size(), 1);
    uint64_t c = 1;
    for (size_t i = dims.size(); i-- > 1;) {
      chunk[i] = dims[i] == 0 ? 1 : std::min<hsize_t>(dims[i], kWrittenMax / c);
      c *= chunk[i];
    }
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t ds = H5Dcreate2(f, path.c_str(), t, space, lcpl, dcpl, H5P_DEFAULT);
  if (ds >= 0 && !big && n > 0) {
    std::vector<double> vals;
    for (std::string tok; vals.size() < kWrittenMax && in >> tok;)
      vals.push_back(std::strtod(tok.c_str(), nullptr));
    std::vector<double> buf(n, 0.0);
    for (uint64_t i = 0; i < n && !vals.empty(); ++i) buf[i] = vals[i % vals.size()];
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());  // converted
  }
  if (ds >= 0) H5Dclose(ds);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
}

/*! A 1-D variable-length string dataset holding `v`. */
void strings(hid_t f, const std::string& path, const std::vector<std::string>& v) {
  const hsize_t n = v.size();
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  std::vector<const char*> p;
  for (const auto& x : v) p.push_back(x.c_str());
  hid_t ds = H5Dcreate2(f, path.c_str(), t, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  if (ds >= 0) H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), H5Dclose(ds);
  H5Pclose(lcpl);
  H5Sclose(space);
  H5Tclose(t);
}

}  // namespace

void limit_allocations() { mac::set_max_elements(int64_t{1} << 24); }

void refused(const InputError& e) {
  static const bool verbose = std::getenv("MAC_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
}

std::string scratch_path(const std::string& target) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/mac-fuzz-" + target + "-" +
         std::to_string(static_cast<long>(getpid())) + ".h5";
}

bool build_h5(const std::string& path, const uint8_t* data, size_t size) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return false;
  std::stringstream text(std::string(reinterpret_cast<const char*>(data), size));
  int items = 0;
  std::map<std::string, std::vector<std::string>> string_sets;  // S lines, written at the end
  for (std::string line; items < kMaxItems && std::getline(text, line); ++items) {
    std::stringstream in(line);
    std::string op, name;
    if (!(in >> op >> name)) continue;
    if (op == "A") {
      std::string kind;
      if (in >> kind) attribute(f, name, kind, in);
    } else if (op == "G") {
      hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
      H5Pset_create_intermediate_group(lcpl, 1);
      const hid_t g = H5Gcreate2(f, name.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT);
      if (g >= 0) H5Gclose(g);
      H5Pclose(lcpl);
    } else if (op == "D") {
      std::string type, shape;
      if (in >> type >> shape) dataset(f, name, type, shape, in);
    } else if (op == "S") {
      std::string text;
      std::getline(in >> std::ws, text);
      string_sets[name].push_back(text);
    }
  }
  for (const auto& [name, v] : string_sets) strings(f, name, v);
  return H5Fclose(f) >= 0;
}

void run_readers(const std::string& target, const uint8_t* data, size_t size,
                 std::initializer_list<std::function<void(const std::string&)>> readers) {
  const std::string path = scratch_path(target);
  if (!build_h5(path, data, size)) return;
  for (const auto& read : readers) {
    try {
      read(path);
    } catch (const InputError& e) {
      refused(e);
    }
  }
  std::remove(path.c_str());
}

}  // namespace mac::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mac::fuzz::limit_allocations();
  return 0;
}
