/*! \file trace_io.cpp
 *  \brief HDF5 (C API, 1.10) reader/writer for the trace file ("mac-trace" v1) and the
 *         run dump ("mac-run" v1). Schemas: docs/file-formats.md, DESIGN §6.
 *
 *  Every failure is one mac::InputError whose message starts with the file name and
 *  names the attribute or dataset. The HDF5 mechanics are mac::h5 (mac/io/h5.hpp).
 */
#include "mac/ref/trace_io.hpp"

#include "mac/io/h5.hpp"
#include "mac/ref/bf16.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace mac::ref {
namespace {

namespace fs = std::filesystem;

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

/*! \brief Scalar root attributes of both file kinds: strings are variable-length UTF-8, as
 *  h5py writes them (the reader also accepts fixed-length strings). */
void write_attr(hid_t loc, const std::string& name, const std::string& v) {
  h5::write_attr(loc, name, v, h5::Str::kVariableUtf8);
}
void write_attr(hid_t loc, const std::string& name, const char* v) {
  write_attr(loc, name, std::string(v));
}
void write_attr(hid_t loc, const std::string& name, int64_t v) { h5::write_attr(loc, name, v); }
void write_attr(hid_t loc, const std::string& name, double v) { h5::write_attr(loc, name, v); }

/*! \brief Checks the schema/version pair shared by both file kinds. */
void check_schema(hid_t root, const std::string& file, const char* schema, int64_t version) {
  const std::string s = h5::attr_string(root, "schema");
  require(s == schema, file, ": attribute schema = '", s, "' is not '", schema, "'");
  const int64_t v = h5::attr_int64(root, "version");
  require(v == version, file, ": attribute version = ", v, " is not supported (this reader knows ",
          schema, " version ", version, ")");
}

/*! \brief Writes `v` with shape `dims`: with gzip > 0 in chunks of whole rows (all heads,
 *  all dims of some positions) of about 256 KiB, shuffle + gzip at that level; contiguous
 *  otherwise. (sizeof(T) is the stored element size.) */
template <typename T>
void write_dataset(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<T>& v, int gzip) {
  h5::Layout layout;  // contiguous
  if (gzip > 0) layout = {(256 * 1024) / sizeof(T), 1, static_cast<unsigned>(gzip)};
  h5::write(loc, name, dims, v, layout);
}

/*! \brief Opens dataset `name` (absolute path), checking its rank and type class (and
 *  byte size, if nonzero). */
h5::Dataset open_dataset(hid_t f, const std::string& file, const std::string& name, int rank,
                         H5T_class_t cls, size_t size, const char* kind) {
  h5::Dataset ds = h5::open_dataset(f, name);
  require(ds.type_class == cls && (size == 0 || ds.type_size == size), file, ": ", name,
          " must be ", kind);
  const int r = static_cast<int>(ds.dims.size());
  require(r == rank, file, ": ", name, " has rank ", r, ", expected ", rank);
  return ds;
}

using h5::shape_str;

// ---------------------------------------------------------------------------
// Trace.
// ---------------------------------------------------------------------------

const char* const kTraceAttrs[] = {"schema",       "version",    "head_dim",      "num_q_heads",
                                   "num_kv_heads", "num_layers", "softmax_scale", "rope_theta",
                                   "rope_style",   "source"};

std::string layer_path(int64_t i) { return msg("/layers/", i); }

TraceMeta read_meta(hid_t f, const std::string& file) {
  check_schema(f, file, kTraceSchema, kTraceVersion);
  TraceMeta m;
  m.head_dim = h5::attr_int64(f, "head_dim");
  m.num_q_heads = h5::attr_int64(f, "num_q_heads");
  m.num_kv_heads = h5::attr_int64(f, "num_kv_heads");
  m.num_layers = h5::attr_int64(f, "num_layers");
  m.softmax_scale = h5::attr_double(f, "softmax_scale");
  m.rope_theta = h5::attr_double(f, "rope_theta");
  const std::string style = h5::attr_string(f, "rope_style");
  try {
    m.rope_style = parse_rope_style(style);
  } catch (const InputError& e) {
    throw InputError(msg(file, ": attribute ", e.what()));
  }
  m.source = h5::attr_string(f, "source");
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
  const Spec specs[] = {{"q_pre", m.num_q_heads},
                        {"q_post", m.num_q_heads},
                        {"k", m.num_kv_heads},
                        {"v", m.num_kv_heads}};
  h5::Dataset ds[4];
  hsize_t T = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string name = base + "/" + specs[i].name;
    ds[i] = open_dataset(f, file, name, 3, H5T_FLOAT, 4, "float32");
    const std::vector<hsize_t>& dims = ds[i].dims;
    const std::vector<hsize_t> want = {i == 0 ? dims[0] : T, static_cast<hsize_t>(specs[i].heads),
                                       static_cast<hsize_t>(m.head_dim)};
    require(dims == want, file, ": ", name, " has shape ", shape_str(dims), ", root attributes",
            i == 0 ? "" : " and q_pre", " require ", shape_str(want), " ([T, ",
            specs[i].heads == m.num_q_heads ? "num_q_heads" : "num_kv_heads", ", head_dim])");
    if (i == 0) T = dims[0];
  }
  require(T >= 1, file, ": ", base, "/q_pre has no positions (T = 0)");
  const hsize_t rows = max_tokens > 0 ? std::min<hsize_t>(T, static_cast<hsize_t>(max_tokens)) : T;

  LayerData L;
  L.tokens = static_cast<int64_t>(rows);
  L.num_q_heads = m.num_q_heads;
  L.num_kv_heads = m.num_kv_heads;
  L.head_dim = m.head_dim;
  std::vector<float>* arrays[4] = {&L.q_pre, &L.q_post, &L.k, &L.v};
  for (int i = 0; i < 4; ++i) *arrays[i] = h5::read_rows<float>(ds[i], rows);
  L.validate(file + ": " + base);
  return L;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API: trace.
// ---------------------------------------------------------------------------

void write_trace(const std::string& path, const Trace& trace, bool compress,
                 const std::map<std::string, std::string>& extra_attrs) {
  const TraceMeta& m = trace.meta;
  try {
    m.validate();
  } catch (const InputError& e) {
    throw InputError(msg(path, ": cannot write trace: ", e.what()));
  }
  require(static_cast<int64_t>(trace.layers.size()) == m.num_layers, path,
          ": cannot write trace: it has ", trace.layers.size(),
          " layers, num_layers = ", m.num_layers);
  for (size_t i = 0; i < trace.layers.size(); ++i) {
    const LayerData& L = trace.layers[i];
    const std::string where = msg(path, ": ", layer_path(static_cast<int64_t>(i)));
    require(L.num_q_heads == m.num_q_heads && L.num_kv_heads == m.num_kv_heads &&
                L.head_dim == m.head_dim,
            where, ": layer shape (Hq = ", L.num_q_heads, ", Hkv = ", L.num_kv_heads,
            ", D = ", L.head_dim, ") does not match the trace (Hq = ", m.num_q_heads,
            ", Hkv = ", m.num_kv_heads, ", D = ", m.head_dim, ")");
    L.validate(where);
  }
  for (const auto& kv : extra_attrs) {
    for (const char* a : kTraceAttrs)
      require(kv.first != a, path, ": extra attribute '", kv.first,
              "' would overwrite a schema attribute");
  }

  TempOutput out(path);
  {
    h5::Handle f = h5::create_file(out.tmp());
    const hid_t r = f.get();
    write_attr(r, "schema", kTraceSchema);
    write_attr(r, "version", kTraceVersion);
    write_attr(r, "head_dim", m.head_dim);
    write_attr(r, "num_q_heads", m.num_q_heads);
    write_attr(r, "num_kv_heads", m.num_kv_heads);
    write_attr(r, "num_layers", m.num_layers);
    write_attr(r, "softmax_scale", m.softmax_scale);
    write_attr(r, "rope_theta", m.rope_theta);
    write_attr(r, "rope_style", to_string(m.rope_style));
    write_attr(r, "source", m.source);
    for (const auto& kv : extra_attrs) write_attr(r, kv.first, kv.second);

    h5::create_group(r, "/layers");
    const int gzip = compress ? 4 : 0;
    for (size_t i = 0; i < trace.layers.size(); ++i) {
      const LayerData& L = trace.layers[i];
      const std::string base = layer_path(static_cast<int64_t>(i));
      h5::create_group(r, base);
      const auto T = static_cast<hsize_t>(L.tokens);
      const std::vector<hsize_t> dq = {T, static_cast<hsize_t>(L.num_q_heads),
                                       static_cast<hsize_t>(L.head_dim)};
      const std::vector<hsize_t> dk = {T, static_cast<hsize_t>(L.num_kv_heads),
                                       static_cast<hsize_t>(L.head_dim)};
      write_dataset(r, base + "/q_pre", dq, L.q_pre, gzip);
      write_dataset(r, base + "/q_post", dq, L.q_post, gzip);
      write_dataset(r, base + "/k", dk, L.k, gzip);
      write_dataset(r, base + "/v", dk, L.v, gzip);
    }
    require(H5Fflush(r, H5F_SCOPE_GLOBAL) >= 0, path, ": cannot flush");
  }  // file closed here, before the rename
  out.commit();
}

TraceMeta read_trace_meta(const std::string& path) {
  h5::Handle f = h5::open_file(path);
  return read_meta(f.get(), path);
}

Trace read_trace(const std::string& path, const std::vector<int64_t>& layers, int64_t max_tokens) {
  require(max_tokens >= 0, path, ": max_tokens = ", max_tokens, " must be >= 0");
  h5::Handle f = h5::open_file(path);
  Trace t;
  t.meta = read_meta(f.get(), path);
  // Every layer group the root promises must be there, and no others.
  {
    h5::Handle g = h5::open_group(f.get(), "/layers");
    H5G_info_t info;
    require(H5Gget_info(g.get(), &info) >= 0, path, ": /layers: cannot query");
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
  h5::Handle f = h5::open_file(path);
  const TraceMeta m = read_meta(f.get(), path);
  return read_layer(f.get(), path, m, layer, max_tokens);
}

// ---------------------------------------------------------------------------
// Run dump.
// ---------------------------------------------------------------------------

void RunDump::resize(int64_t S, int64_t hq, int64_t d) {
  require(S >= 0 && hq >= 1 && d >= 1, "RunDump::resize: bad shape S = ", S, ", Hq = ", hq,
          ", D = ", d);
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
          ": cannot write run dump: bad shape S = ", d.steps, ", Hq = ", d.num_q_heads,
          ", D = ", d.head_dim);
  const auto S = static_cast<size_t>(d.steps);
  const auto sh = S * static_cast<size_t>(d.num_q_heads);
  const auto shd = sh * static_cast<size_t>(d.head_dim);
  auto need = [&](size_t have, size_t want, const char* name) {
    require(have == want, path, ": cannot write run dump: ", name, " has ", have,
            " values, [S, Hq(, D)] = [", d.steps, ", ", d.num_q_heads, ", ", d.head_dim, "] needs ",
            want);
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
  check_dump_shapes(d, path);
  TempOutput out(path);
  {
    h5::Handle f = h5::create_file(out.tmp());
    const hid_t r = f.get();
    write_attr(r, "schema", kRunSchema);
    write_attr(r, "version", kRunVersion);
    write_attr(r, "tau", d.tau);
    write_attr(r, "ring", d.ring);
    write_attr(r, "tail", d.tail);
    write_attr(r, "sinks", d.sinks);
    write_attr(r, "gen_min", d.gen_min);
    write_attr(r, "variant", d.variant);
    write_attr(r, "precision", d.precision);
    write_attr(r, "prefill", d.prefill);
    write_attr(r, "layer", d.layer);
    write_attr(r, "prefill_mode", d.prefill_mode);
    write_attr(r, "storage", d.storage);
    write_attr(r, "trace_source", d.trace_source);

    const auto S = static_cast<hsize_t>(d.steps), H = static_cast<hsize_t>(d.num_q_heads),
               D = static_cast<hsize_t>(d.head_dim);
    const std::vector<hsize_t> s1 = {S}, sh = {S, H}, shd = {S, H, D};
    // Run dumps are large FP64 arrays that compress poorly; gzip level 1 + shuffle keeps
    // writing fast while still squeezing the int8/int64 columns.
    const int gz = 1;
    write_dataset(r, "/position", s1, d.position, gz);
    write_dataset(r, "/hit", sh, d.hit, gz);
    write_dataset(r, "/match_pos", sh, d.match_pos, gz);
    write_dataset(r, "/d2", sh, d.d2, gz);
    write_dataset(r, "/out", shd, d.out, gz);
    write_dataset(r, "/lse", sh, d.lse, gz);
    write_dataset(r, "/exact_out", shd, d.exact_out, gz);
    write_dataset(r, "/exact_lse", sh, d.exact_lse, gz);
    write_dataset(r, "/kv_tokens_read", sh, d.kv_tokens_read, gz);
    require(H5Fflush(r, H5F_SCOPE_GLOBAL) >= 0, path, ": cannot flush");
  }
  out.commit();
}

RunDump read_run_dump(const std::string& path) {
  h5::Handle f = h5::open_file(path);
  const hid_t r = f.get();
  check_schema(r, path, kRunSchema, kRunVersion);
  RunDump d;
  d.tau = h5::attr_double(r, "tau");
  d.ring = h5::attr_int64(r, "ring");
  d.tail = h5::attr_int64(r, "tail");
  d.sinks = h5::attr_int64(r, "sinks");
  d.gen_min = h5::attr_int64(r, "gen_min");
  d.variant = h5::attr_string(r, "variant");
  d.precision = h5::attr_string(r, "precision");
  d.prefill = h5::attr_int64(r, "prefill");
  d.layer = h5::attr_int64(r, "layer");
  d.prefill_mode = h5::attr_string(r, "prefill_mode");
  d.storage = h5::attr_string(r, "storage");
  d.trace_source = h5::attr_string(r, "trace_source");

  const h5::Dataset pos =
      open_dataset(r, path, "/position", 1, H5T_INTEGER, 0, "an integer dataset");
  const hsize_t S = pos.dims[0];
  const h5::Dataset out =
      open_dataset(r, path, "/out", 3, H5T_FLOAT, 0, "a floating-point dataset");
  const std::vector<hsize_t>& dims = out.dims;
  require(dims[0] == S, path, ": /out has shape ", shape_str(dims), ", /position has ", S,
          " steps");
  const hsize_t H = dims[1], D = dims[2];
  require(H >= 1 && D >= 1, path, ": /out has shape ", shape_str(dims), " (Hq and D must be >= 1)");
  d.steps = static_cast<int64_t>(S);
  d.num_q_heads = static_cast<int64_t>(H);
  d.head_dim = static_cast<int64_t>(D);
  d.position = h5::read_rows<int64_t>(pos, S);
  d.out = h5::read_rows<double>(out, S);

  auto read_sh = [&](const char* name, H5T_class_t cls, auto& vec, bool with_d) {
    const int rank = with_d ? 3 : 2;
    const h5::Dataset ds =
        open_dataset(r, path, name, rank, cls, 0,
                     cls == H5T_INTEGER ? "an integer dataset" : "a floating-point dataset");
    const std::vector<hsize_t>& dd = ds.dims;
    const std::vector<hsize_t> want =
        with_d ? std::vector<hsize_t>{S, H, D} : std::vector<hsize_t>{S, H};
    require(dd == want, path, ": ", name, " has shape ", shape_str(dd), ", expected ",
            shape_str(want), " (from /position and /out)");
    vec = h5::read_rows<typename std::decay_t<decltype(vec)>::value_type>(ds, S);
  };
  read_sh("/hit", H5T_INTEGER, d.hit, false);
  read_sh("/match_pos", H5T_INTEGER, d.match_pos, false);
  read_sh("/d2", H5T_FLOAT, d.d2, false);
  read_sh("/lse", H5T_FLOAT, d.lse, false);
  read_sh("/exact_out", H5T_FLOAT, d.exact_out, true);
  read_sh("/exact_lse", H5T_FLOAT, d.exact_lse, false);
  read_sh("/kv_tokens_read", H5T_INTEGER, d.kv_tokens_read, false);
  return d;
}

}  // namespace mac::ref
