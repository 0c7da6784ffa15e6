/*! \file trace_io.cpp
 *  \brief HDF5 (C API, 1.10) reader/writer for the trace file ("mac-trace" v1) and the
 *         run dump ("mac-run" v1). Schemas: docs/file-formats.md, DESIGN §6.
 *
 *  Every failure is one mac::InputError whose message starts with the file name and
 *  names the attribute or dataset. HDF5's own error-stack printing is switched off:
 *  our message is the one the user sees.
 */
#include "mac/ref/trace_io.hpp"

#include "mac/ref/bf16.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <utility>

namespace mac::ref {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Small RAII layer over hid_t handles.
// ---------------------------------------------------------------------------

/*! \brief Owns one HDF5 identifier and closes it with the matching H5*close. */
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~Hid() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

void silence_hdf5() {
  // Our InputError carries the message; HDF5's stack dump on stderr would only confuse.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

/*! \brief Throws InputError("<file>: <what>") unless the HDF5 status is non-negative. */
template <typename T, typename... Args>
T check(T status, const std::string& file, const Args&... what) {
  if (status < 0) throw InputError(msg(file, ": ", what...));
  return status;
}

// ---------------------------------------------------------------------------
// Temporary output file: `<path>.tmp.<pid>`, renamed on commit, removed otherwise.
// ---------------------------------------------------------------------------

class TempOutput {
 public:
  explicit TempOutput(const std::string& path) : path_(path) {
    require(!path.empty(), "output path is empty");
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    require(fs::is_directory(dir, ec), path, ": cannot write: directory '", dir.string(),
            "' does not exist");
    require(!fs::is_directory(p, ec), path, ": cannot write: it is a directory");
    tmp_ = msg(path, ".tmp.", static_cast<long>(::getpid()));
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  ~TempOutput() {
    if (!committed_) std::remove(tmp_.c_str());
  }
  const std::string& tmp() const { return tmp_; }
  /*! \brief Renames the finished temporary file onto the target path. */
  void commit() {
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw InputError(msg(path_, ": cannot rename temporary file '", tmp_, "' onto it"));
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

Hid create_file(const std::string& tmp, const std::string& path) {
  hid_t f = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) throw InputError(msg(path, ": cannot create temporary file '", tmp, "'"));
  return Hid(f, H5Fclose);
}

Hid open_file(const std::string& path) {
  silence_hdf5();
  std::error_code ec;
  require(fs::exists(path, ec), path, ": no such file");
  require(!fs::is_directory(path, ec), path, ": is a directory, not an HDF5 file");
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  require(is_h5 > 0, path, is_h5 == 0 ? ": not an HDF5 file" : ": cannot be read");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  require(f >= 0, path, ": cannot open HDF5 file");
  return Hid(f, H5Fclose);
}

// ---------------------------------------------------------------------------
// Attributes (scalar). Strings are variable-length UTF-8, as h5py writes them;
// the reader also accepts fixed-length strings.
// ---------------------------------------------------------------------------

void write_attr_raw(hid_t loc, const std::string& file, const std::string& name, hid_t ftype,
                    hid_t mtype, const void* data) {
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  Hid attr(H5Acreate2(loc, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  check(attr.get(), file, "attribute '", name, "': cannot create");
  check(H5Awrite(attr.get(), mtype, data), file, "attribute '", name, "': cannot write");
}

void write_attr(hid_t loc, const std::string& file, const std::string& name, int64_t v) {
  write_attr_raw(loc, file, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
void write_attr(hid_t loc, const std::string& file, const std::string& name, double v) {
  write_attr_raw(loc, file, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}
void write_attr(hid_t loc, const std::string& file, const std::string& name, const std::string& v) {
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const char* p = v.c_str();
  write_attr_raw(loc, file, name, type.get(), type.get(), &p);
}
void write_attr(hid_t loc, const std::string& file, const std::string& name, const char* v) {
  write_attr(loc, file, name, std::string(v));
}

/*! \brief Opens a root attribute and checks it holds exactly one element of `cls`. */
Hid open_attr(hid_t loc, const std::string& file, const std::string& name, H5T_class_t cls,
              const char* kind, H5T_class_t cls2 = H5T_NO_CLASS) {
  const htri_t exists = H5Aexists(loc, name.c_str());
  require(exists > 0, file, ": attribute ", name, " is missing");
  Hid attr(H5Aopen(loc, name.c_str(), H5P_DEFAULT), H5Aclose);
  check(attr.get(), file, "attribute ", name, ": cannot open");
  Hid space(H5Aget_space(attr.get()), H5Sclose);
  require(H5Sget_simple_extent_npoints(space.get()) == 1, file, ": attribute ", name,
          " must be a scalar");
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  const H5T_class_t c = H5Tget_class(type.get());
  require(c == cls || (cls2 != H5T_NO_CLASS && c == cls2), file, ": attribute ", name, " must be ", kind);
  return attr;
}

int64_t read_attr_int(hid_t loc, const std::string& file, const std::string& name) {
  Hid attr = open_attr(loc, file, name, H5T_INTEGER, "an integer");
  int64_t v = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), file, "attribute ", name, ": cannot read");
  return v;
}

double read_attr_double(hid_t loc, const std::string& file, const std::string& name) {
  // An integer (e.g. rope_theta = 10000 written by a script) converts exactly enough.
  Hid attr = open_attr(loc, file, name, H5T_FLOAT, "a number", H5T_INTEGER);
  double v = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), file, "attribute ", name, ": cannot read");
  return v;
}

std::string read_attr_string(hid_t loc, const std::string& file, const std::string& name) {
  Hid attr = open_attr(loc, file, name, H5T_STRING, "a string");
  Hid ftype(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tis_variable_str(ftype.get()) > 0) {
    Hid mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
    char* p = nullptr;
    check(H5Aread(attr.get(), mtype.get(), &p), file, "attribute ", name, ": cannot read");
    std::string s = p ? p : "";
    if (p) H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(ftype.get());
  Hid mtype(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mtype.get(), n + 1);
  H5Tset_strpad(mtype.get(), H5T_STR_NULLTERM);
  H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
  std::string buf(n + 1, '\0');
  check(H5Aread(attr.get(), mtype.get(), buf.data()), file, "attribute ", name, ": cannot read");
  buf.resize(std::char_traits<char>::length(buf.c_str()));
  return buf;
}

/*! \brief Checks the schema/version pair shared by both file kinds. */
void check_schema(hid_t root, const std::string& file, const char* schema, int64_t version) {
  const std::string s = read_attr_string(root, file, "schema");
  require(s == schema, file, ": attribute schema = '", s, "' is not '", schema, "'");
  const int64_t v = read_attr_int(root, file, "version");
  require(v == version, file, ": attribute version = ", v, " is not supported (this reader knows ",
          schema, " version ", version, ")");
}

// ---------------------------------------------------------------------------
// Datasets.
// ---------------------------------------------------------------------------

/*! \brief Creates and writes a dataset of the given shape. Chunked + shuffle + gzip
 *  (level `gzip`) when gzip > 0 and the dataset is not empty; contiguous otherwise. */
void write_dataset(hid_t loc, const std::string& file, const std::string& name, hid_t ftype,
                   hid_t mtype, const std::vector<hsize_t>& dims, const void* data, int gzip) {
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  check(space.get(), file, name, ": cannot create dataspace");
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t total = 1;
  for (hsize_t d : dims) total *= d;
  if (gzip > 0 && total > 0) {
    // Chunks of whole rows (all heads, all dims of some positions), about 256 KiB.
    std::vector<hsize_t> chunk = dims;
    hsize_t row = 1;
    for (size_t i = 1; i < dims.size(); ++i) row *= dims[i];
    const hsize_t elem = H5Tget_size(ftype);
    const hsize_t rows = std::max<hsize_t>(1, (256 * 1024) / std::max<hsize_t>(1, row * elem));
    chunk[0] = std::min(dims[0], rows);
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), file, name,
          ": cannot set chunking");
    check(H5Pset_shuffle(dcpl.get()), file, name, ": cannot set shuffle filter");
    check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip)), file, name,
          ": cannot set gzip filter");
  }
  Hid ds(H5Dcreate2(loc, name.c_str(), ftype, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
         H5Dclose);
  check(ds.get(), file, name, ": cannot create dataset");
  if (total > 0)
    check(H5Dwrite(ds.get(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), file, name,
          ": cannot write");
}

/*! \brief Opens dataset `name` (absolute path) and returns it with its dims, checking
 *  that it exists, has the given rank and type class (and byte size, if nonzero). */
Hid open_dataset(hid_t f, const std::string& file, const std::string& name, int rank,
                 H5T_class_t cls, size_t size, const char* kind, std::vector<hsize_t>& dims) {
  // H5Lexists on a path whose intermediate group is missing fails; test each level.
  std::string prefix;
  size_t pos = 1;
  while (true) {
    const size_t next = name.find('/', pos);
    prefix = name.substr(0, next);
    require(H5Lexists(f, prefix.c_str(), H5P_DEFAULT) > 0, file, ": ", name, " is missing",
            prefix == name ? "" : msg(" (no ", prefix, ")"));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  Hid ds(H5Dopen2(f, name.c_str(), H5P_DEFAULT), H5Dclose);
  require(ds.ok(), file, ": ", name, " is not a dataset");
  Hid type(H5Dget_type(ds.get()), H5Tclose);
  require(H5Tget_class(type.get()) == cls && (size == 0 || H5Tget_size(type.get()) == size), file,
          ": ", name, " must be ", kind);
  Hid space(H5Dget_space(ds.get()), H5Sclose);
  const int r = H5Sget_simple_extent_ndims(space.get());
  require(r == rank, file, ": ", name, " has rank ", r, ", expected ", rank);
  dims.assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return ds;
}

std::string shape_str(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

/*! \brief Reads rows [0, rows) of an open dataset into `out`. */
template <typename T>
void read_rows(hid_t ds, const std::string& file, const std::string& name, hid_t mtype,
               const std::vector<hsize_t>& dims, hsize_t rows, std::vector<T>& out) {
  hsize_t row = 1;
  for (size_t i = 1; i < dims.size(); ++i) row *= dims[i];
  out.assign(static_cast<size_t>(rows * row), T{});
  if (rows == 0 || row == 0) return;
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  count[0] = rows;
  Hid fspace(H5Dget_space(ds), H5Sclose);
  check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        file, name, ": cannot select rows");
  Hid mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  check(H5Dread(ds, mtype, mspace.get(), fspace.get(), H5P_DEFAULT, out.data()), file, name,
        ": cannot read");
}

// ---------------------------------------------------------------------------
// Trace.
// ---------------------------------------------------------------------------

const char* const kTraceAttrs[] = {"schema",       "version",       "head_dim",   "num_q_heads",
                                   "num_kv_heads", "num_layers",    "softmax_scale", "rope_theta",
                                   "rope_style",   "source"};

std::string layer_path(int64_t i) { return msg("/layers/", i); }

TraceMeta read_meta(hid_t f, const std::string& file) {
  check_schema(f, file, kTraceSchema, kTraceVersion);
  TraceMeta m;
  m.head_dim = read_attr_int(f, file, "head_dim");
  m.num_q_heads = read_attr_int(f, file, "num_q_heads");
  m.num_kv_heads = read_attr_int(f, file, "num_kv_heads");
  m.num_layers = read_attr_int(f, file, "num_layers");
  m.softmax_scale = read_attr_double(f, file, "softmax_scale");
  m.rope_theta = read_attr_double(f, file, "rope_theta");
  const std::string style = read_attr_string(f, file, "rope_style");
  try {
    m.rope_style = parse_rope_style(style);
  } catch (const InputError& e) {
    throw InputError(msg(file, ": attribute ", e.what()));
  }
  m.source = read_attr_string(f, file, "source");
  try {
    m.validate();
  } catch (const InputError& e) {
    throw InputError(msg(file, ": root attributes: ", e.what()));
  }
  return m;
}

LayerData read_layer(hid_t f, const std::string& file, const TraceMeta& m, int64_t layer,
                     int64_t max_tokens) {
  require(layer >= 0 && layer < m.num_layers, file, ": layer ", layer, " is out of range [0, ",
          m.num_layers, ")");
  const std::string base = layer_path(layer);
  struct Spec {
    const char* name;
    int64_t heads;
  };
  const Spec specs[] = {{"q_pre", m.num_q_heads}, {"q_post", m.num_q_heads},
                        {"k", m.num_kv_heads},    {"v", m.num_kv_heads}};
  Hid ds[4];
  std::vector<hsize_t> dims[4];
  hsize_t T = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string name = base + "/" + specs[i].name;
    ds[i] = open_dataset(f, file, name, 3, H5T_FLOAT, 4, "float32", dims[i]);
    const std::vector<hsize_t> want = {i == 0 ? dims[0][0] : T, static_cast<hsize_t>(specs[i].heads),
                                       static_cast<hsize_t>(m.head_dim)};
    require(dims[i] == want, file, ": ", name, " has shape ", shape_str(dims[i]), ", root attributes",
            i == 0 ? "" : " and q_pre", " require ", shape_str(want), " ([T, ",
            specs[i].heads == m.num_q_heads ? "num_q_heads" : "num_kv_heads", ", head_dim])");
    if (i == 0) T = dims[0][0];
  }
  require(T >= 1, file, ": ", base, "/q_pre has no positions (T = 0)");
  const hsize_t rows = max_tokens > 0 ? std::min<hsize_t>(T, static_cast<hsize_t>(max_tokens)) : T;

  LayerData L;
  L.tokens = static_cast<int64_t>(rows);
  L.num_q_heads = m.num_q_heads;
  L.num_kv_heads = m.num_kv_heads;
  L.head_dim = m.head_dim;
  std::vector<float>* arrays[4] = {&L.q_pre, &L.q_post, &L.k, &L.v};
  for (int i = 0; i < 4; ++i)
    read_rows(ds[i].get(), file, base + "/" + specs[i].name, H5T_NATIVE_FLOAT, dims[i], rows,
              *arrays[i]);
  L.validate(file + ": " + base);
  return L;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API: trace.
// ---------------------------------------------------------------------------

void write_trace(const std::string& path, const Trace& trace, bool compress,
                 const std::map<std::string, std::string>& extra_attrs) {
  silence_hdf5();
  const TraceMeta& m = trace.meta;
  try {
    m.validate();
  } catch (const InputError& e) {
    throw InputError(msg(path, ": cannot write trace: ", e.what()));
  }
  require(static_cast<int64_t>(trace.layers.size()) == m.num_layers, path,
          ": cannot write trace: it has ", trace.layers.size(), " layers, num_layers = ", m.num_layers);
  for (size_t i = 0; i < trace.layers.size(); ++i) {
    const LayerData& L = trace.layers[i];
    const std::string where = msg(path, ": ", layer_path(static_cast<int64_t>(i)));
    require(L.num_q_heads == m.num_q_heads && L.num_kv_heads == m.num_kv_heads &&
                L.head_dim == m.head_dim,
            where, ": layer shape (Hq = ", L.num_q_heads, ", Hkv = ", L.num_kv_heads, ", D = ",
            L.head_dim, ") does not match the trace (Hq = ", m.num_q_heads, ", Hkv = ",
            m.num_kv_heads, ", D = ", m.head_dim, ")");
    L.validate(where);
  }
  for (const auto& kv : extra_attrs) {
    for (const char* a : kTraceAttrs)
      require(kv.first != a, path, ": extra attribute '", kv.first, "' would overwrite a schema attribute");
  }

  TempOutput out(path);
  {
    Hid f = create_file(out.tmp(), path);
    const hid_t r = f.get();
    write_attr(r, path, "schema", kTraceSchema);
    write_attr(r, path, "version", kTraceVersion);
    write_attr(r, path, "head_dim", m.head_dim);
    write_attr(r, path, "num_q_heads", m.num_q_heads);
    write_attr(r, path, "num_kv_heads", m.num_kv_heads);
    write_attr(r, path, "num_layers", m.num_layers);
    write_attr(r, path, "softmax_scale", m.softmax_scale);
    write_attr(r, path, "rope_theta", m.rope_theta);
    write_attr(r, path, "rope_style", to_string(m.rope_style));
    write_attr(r, path, "source", m.source);
    for (const auto& kv : extra_attrs) write_attr(r, path, kv.first, kv.second);

    Hid layers(H5Gcreate2(r, "/layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    check(layers.get(), path, "/layers: cannot create group");
    const int gzip = compress ? 4 : 0;
    for (size_t i = 0; i < trace.layers.size(); ++i) {
      const LayerData& L = trace.layers[i];
      const std::string base = layer_path(static_cast<int64_t>(i));
      Hid g(H5Gcreate2(r, base.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      check(g.get(), path, base, ": cannot create group");
      const auto T = static_cast<hsize_t>(L.tokens);
      const std::vector<hsize_t> dq = {T, static_cast<hsize_t>(L.num_q_heads), static_cast<hsize_t>(L.head_dim)};
      const std::vector<hsize_t> dk = {T, static_cast<hsize_t>(L.num_kv_heads), static_cast<hsize_t>(L.head_dim)};
      write_dataset(r, path, base + "/q_pre", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dq, L.q_pre.data(), gzip);
      write_dataset(r, path, base + "/q_post", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dq, L.q_post.data(), gzip);
      write_dataset(r, path, base + "/k", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dk, L.k.data(), gzip);
      write_dataset(r, path, base + "/v", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dk, L.v.data(), gzip);
    }
    check(H5Fflush(r, H5F_SCOPE_GLOBAL), path, "cannot flush");
  }  // file closed here, before the rename
  out.commit();
}

TraceMeta read_trace_meta(const std::string& path) {
  Hid f = open_file(path);
  return read_meta(f.get(), path);
}

Trace read_trace(const std::string& path, const std::vector<int64_t>& layers, int64_t max_tokens) {
  require(max_tokens >= 0, path, ": max_tokens = ", max_tokens, " must be >= 0");
  Hid f = open_file(path);
  Trace t;
  t.meta = read_meta(f.get(), path);
  // Every layer group the root promises must be there, and no others.
  {
    require(H5Lexists(f.get(), "/layers", H5P_DEFAULT) > 0, path, ": /layers is missing");
    Hid g(H5Gopen2(f.get(), "/layers", H5P_DEFAULT), H5Gclose);
    require(g.ok(), path, ": /layers is not a group");
    H5G_info_t info;
    check(H5Gget_info(g.get(), &info), path, "/layers: cannot query");
    require(static_cast<int64_t>(info.nlinks) == t.meta.num_layers, path, ": /layers has ",
            info.nlinks, " members, attribute num_layers = ", t.meta.num_layers);
  }
  std::vector<int64_t> sel = layers;
  if (sel.empty())
    for (int64_t i = 0; i < t.meta.num_layers; ++i) sel.push_back(i);
  for (int64_t l : sel) t.layers.push_back(read_layer(f.get(), path, t.meta, l, max_tokens));
  t.meta.num_layers = static_cast<int64_t>(t.layers.size());
  return t;
}

LayerData read_trace_layer(const std::string& path, int64_t layer, int64_t max_tokens) {
  require(max_tokens >= 0, path, ": max_tokens = ", max_tokens, " must be >= 0");
  Hid f = open_file(path);
  const TraceMeta m = read_meta(f.get(), path);
  return read_layer(f.get(), path, m, layer, max_tokens);
}

// ---------------------------------------------------------------------------
// Run dump.
// ---------------------------------------------------------------------------

void RunDump::resize(int64_t S, int64_t hq, int64_t d) {
  require(S >= 0 && hq >= 1 && d >= 1, "RunDump::resize: bad shape S = ", S, ", Hq = ", hq, ", D = ", d);
  steps = S;
  num_q_heads = hq;
  head_dim = d;
  const auto sh = static_cast<size_t>(S * hq);
  const auto shd = static_cast<size_t>(S * hq * d);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  position.assign(static_cast<size_t>(S), -1);
  hit.assign(sh, 0);
  match_pos.assign(sh, -1);
  d2.assign(sh, nan);
  out.assign(shd, nan);
  lse.assign(sh, nan);
  exact_out.assign(shd, nan);
  exact_lse.assign(sh, nan);
  kv_tokens_read.assign(sh, 0);
}

namespace {

void check_dump_shapes(const RunDump& d, const std::string& path) {
  require(d.steps >= 0 && d.num_q_heads >= 1 && d.head_dim >= 1, path,
          ": cannot write run dump: bad shape S = ", d.steps, ", Hq = ", d.num_q_heads, ", D = ",
          d.head_dim);
  const auto S = static_cast<size_t>(d.steps);
  const auto sh = S * static_cast<size_t>(d.num_q_heads);
  const auto shd = sh * static_cast<size_t>(d.head_dim);
  auto need = [&](size_t have, size_t want, const char* name) {
    require(have == want, path, ": cannot write run dump: ", name, " has ", have,
            " values, [S, Hq(, D)] = [", d.steps, ", ", d.num_q_heads, ", ", d.head_dim,
            "] needs ", want);
  };
  need(d.position.size(), S, "position");
  need(d.hit.size(), sh, "hit");
  need(d.match_pos.size(), sh, "match_pos");
  need(d.d2.size(), sh, "d2");
  need(d.out.size(), shd, "out");
  need(d.lse.size(), sh, "lse");
  need(d.exact_out.size(), shd, "exact_out");
  need(d.exact_lse.size(), sh, "exact_lse");
  need(d.kv_tokens_read.size(), sh, "kv_tokens_read");
}

}  // namespace

void write_run_dump(const std::string& path, const RunDump& d) {
  silence_hdf5();
  check_dump_shapes(d, path);
  TempOutput out(path);
  {
    Hid f = create_file(out.tmp(), path);
    const hid_t r = f.get();
    write_attr(r, path, "schema", kRunSchema);
    write_attr(r, path, "version", kRunVersion);
    write_attr(r, path, "tau", d.tau);
    write_attr(r, path, "ring", d.ring);
    write_attr(r, path, "tail", d.tail);
    write_attr(r, path, "sinks", d.sinks);
    write_attr(r, path, "gen_min", d.gen_min);
    write_attr(r, path, "variant", d.variant);
    write_attr(r, path, "precision", d.precision);
    write_attr(r, path, "prefill", d.prefill);
    write_attr(r, path, "layer", d.layer);
    write_attr(r, path, "prefill_mode", d.prefill_mode);
    write_attr(r, path, "storage", d.storage);
    write_attr(r, path, "trace_source", d.trace_source);

    const auto S = static_cast<hsize_t>(d.steps), H = static_cast<hsize_t>(d.num_q_heads),
               D = static_cast<hsize_t>(d.head_dim);
    const std::vector<hsize_t> s1 = {S}, sh = {S, H}, shd = {S, H, D};
    // Run dumps are large FP64 arrays that compress poorly; gzip level 1 + shuffle keeps
    // writing fast while still squeezing the int8/int64 columns.
    const int gz = 1;
    write_dataset(r, path, "/position", H5T_STD_I64LE, H5T_NATIVE_INT64, s1, d.position.data(), gz);
    write_dataset(r, path, "/hit", H5T_STD_I8LE, H5T_NATIVE_INT8, sh, d.hit.data(), gz);
    write_dataset(r, path, "/match_pos", H5T_STD_I64LE, H5T_NATIVE_INT64, sh, d.match_pos.data(), gz);
    write_dataset(r, path, "/d2", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, sh, d.d2.data(), gz);
    write_dataset(r, path, "/out", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, shd, d.out.data(), gz);
    write_dataset(r, path, "/lse", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, sh, d.lse.data(), gz);
    write_dataset(r, path, "/exact_out", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, shd, d.exact_out.data(), gz);
    write_dataset(r, path, "/exact_lse", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, sh, d.exact_lse.data(), gz);
    write_dataset(r, path, "/kv_tokens_read", H5T_STD_I64LE, H5T_NATIVE_INT64, sh,
                  d.kv_tokens_read.data(), gz);
    check(H5Fflush(r, H5F_SCOPE_GLOBAL), path, "cannot flush");
  }
  out.commit();
}

RunDump read_run_dump(const std::string& path) {
  Hid f = open_file(path);
  const hid_t r = f.get();
  check_schema(r, path, kRunSchema, kRunVersion);
  RunDump d;
  d.tau = read_attr_double(r, path, "tau");
  d.ring = read_attr_int(r, path, "ring");
  d.tail = read_attr_int(r, path, "tail");
  d.sinks = read_attr_int(r, path, "sinks");
  d.gen_min = read_attr_int(r, path, "gen_min");
  d.variant = read_attr_string(r, path, "variant");
  d.precision = read_attr_string(r, path, "precision");
  d.prefill = read_attr_int(r, path, "prefill");
  d.layer = read_attr_int(r, path, "layer");
  d.prefill_mode = read_attr_string(r, path, "prefill_mode");
  d.storage = read_attr_string(r, path, "storage");
  d.trace_source = read_attr_string(r, path, "trace_source");

  std::vector<hsize_t> dims;
  Hid pos = open_dataset(r, path, "/position", 1, H5T_INTEGER, 0, "an integer dataset", dims);
  const hsize_t S = dims[0];
  Hid out = open_dataset(r, path, "/out", 3, H5T_FLOAT, 0, "a floating-point dataset", dims);
  require(dims[0] == S, path, ": /out has shape ", shape_str(dims), ", /position has ", S, " steps");
  const hsize_t H = dims[1], D = dims[2];
  require(H >= 1 && D >= 1, path, ": /out has shape ", shape_str(dims), " (Hq and D must be >= 1)");
  d.steps = static_cast<int64_t>(S);
  d.num_q_heads = static_cast<int64_t>(H);
  d.head_dim = static_cast<int64_t>(D);
  read_rows(pos.get(), path, "/position", H5T_NATIVE_INT64, {S}, S, d.position);
  read_rows(out.get(), path, "/out", H5T_NATIVE_DOUBLE, {S, H, D}, S, d.out);

  auto read_sh = [&](const char* name, H5T_class_t cls, hid_t mtype, auto& vec, bool with_d) {
    std::vector<hsize_t> dd;
    const int rank = with_d ? 3 : 2;
    Hid ds = open_dataset(r, path, name, rank, cls, 0,
                          cls == H5T_INTEGER ? "an integer dataset" : "a floating-point dataset", dd);
    const std::vector<hsize_t> want = with_d ? std::vector<hsize_t>{S, H, D} : std::vector<hsize_t>{S, H};
    require(dd == want, path, ": ", name, " has shape ", shape_str(dd), ", expected ", shape_str(want),
            " (from /position and /out)");
    read_rows(ds.get(), path, name, mtype, dd, S, vec);
  };
  read_sh("/hit", H5T_INTEGER, H5T_NATIVE_INT8, d.hit, false);
  read_sh("/match_pos", H5T_INTEGER, H5T_NATIVE_INT64, d.match_pos, false);
  read_sh("/d2", H5T_FLOAT, H5T_NATIVE_DOUBLE, d.d2, false);
  read_sh("/lse", H5T_FLOAT, H5T_NATIVE_DOUBLE, d.lse, false);
  read_sh("/exact_out", H5T_FLOAT, H5T_NATIVE_DOUBLE, d.exact_out, true);
  read_sh("/exact_lse", H5T_FLOAT, H5T_NATIVE_DOUBLE, d.exact_lse, false);
  read_sh("/kv_tokens_read", H5T_INTEGER, H5T_NATIVE_INT64, d.kv_tokens_read, false);
  return d;
}

}  // namespace mac::ref
