/*! \file trace_io.cpp
 *  \brief HDF5 (C API, 1.10) reader/writer for the trace file ("mac-trace" v1) and the
 *         run dump ("mac-run" v1). Schemas: docs/file-formats.md, DESIGN §6.
 *
 *  Every failure is one mac::InputError whose message starts with the file name and
 *  names the attribute or dataset. The HDF5 mechanics are mac::h5 (mac/io/h5.hpp).
 */
#include "mac/io/trace_io.hpp"

#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"
#include "mac/io/schema.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::io {
namespace {

using ref::LayerData;
using ref::Trace;
using ref::TraceMeta;
namespace tr = schema::trace;
namespace rn = schema::run;

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
  const std::string s = h5::attr_string(root, schema::kSchema);
  require(s == schema, file, ": attribute schema = '", s, "' is not '", schema, "'");
  const int64_t v = h5::attr_int64(root, schema::kVersion);
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

/*! \brief Reads string attribute `name` and parses it, the parser's message prefixed with
 *  the file and the attribute. */
template <typename Parse>
auto parse_attr(hid_t loc, const std::string& file, const char* name, Parse parse) {
  const std::string v = h5::attr_string(loc, name);
  try {
    return parse(v);
  } catch (const InputError& e) {
    throw InputError(msg(file, ": attribute ", name, ": ", e.what()));
  }
}

// ---------------------------------------------------------------------------
// Trace.
// ---------------------------------------------------------------------------

const char* const kTraceAttrs[] = {
    schema::kSchema, schema::kVersion,  tr::kHeadDim,   tr::kNumQHeads, tr::kNumKvHeads,
    tr::kNumLayers,  tr::kSoftmaxScale, tr::kRopeTheta, tr::kRopeStyle, tr::kSource};

std::string layer_path(int64_t i) { return msg(tr::kLayers, "/", i); }

TraceMeta read_meta(hid_t f, const std::string& file) {
  check_schema(f, file, tr::kName, tr::kVersion);
  TraceMeta m;
  m.head_dim = h5::attr_int64(f, tr::kHeadDim);
  m.num_q_heads = h5::attr_int64(f, tr::kNumQHeads);
  m.num_kv_heads = h5::attr_int64(f, tr::kNumKvHeads);
  m.num_layers = h5::attr_int64(f, tr::kNumLayers);
  m.softmax_scale = h5::attr_double(f, tr::kSoftmaxScale);
  m.rope_theta = h5::attr_double(f, tr::kRopeTheta);
  const std::string style = h5::attr_string(f, tr::kRopeStyle);
  try {
    m.rope_style = ref::parse_rope_style(style);
  } catch (const InputError& e) {
    throw InputError(msg(file, ": attribute ", e.what()));
  }
  m.source = h5::attr_string(f, tr::kSource);
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
  const Spec specs[] = {{tr::kQPre, m.num_q_heads},
                        {tr::kQPost, m.num_q_heads},
                        {tr::kK, m.num_kv_heads},
                        {tr::kV, m.num_kv_heads}};
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

  write_h5_atomically(path, [&](hid_t r) {
    write_attr(r, schema::kSchema, tr::kName);
    write_attr(r, schema::kVersion, tr::kVersion);
    write_attr(r, tr::kHeadDim, m.head_dim);
    write_attr(r, tr::kNumQHeads, m.num_q_heads);
    write_attr(r, tr::kNumKvHeads, m.num_kv_heads);
    write_attr(r, tr::kNumLayers, m.num_layers);
    write_attr(r, tr::kSoftmaxScale, m.softmax_scale);
    write_attr(r, tr::kRopeTheta, m.rope_theta);
    write_attr(r, tr::kRopeStyle, to_string(m.rope_style));
    write_attr(r, tr::kSource, m.source);
    for (const auto& kv : extra_attrs) write_attr(r, kv.first, kv.second);

    h5::create_group(r, tr::kLayers);
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
      write_dataset(r, base + "/" + tr::kQPre, dq, L.q_pre, gzip);
      write_dataset(r, base + "/" + tr::kQPost, dq, L.q_post, gzip);
      write_dataset(r, base + "/" + tr::kK, dk, L.k, gzip);
      write_dataset(r, base + "/" + tr::kV, dk, L.v, gzip);
    }
  });
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
    h5::Handle g = h5::open_group(f.get(), tr::kLayers);
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
  write_h5_atomically(path, [&](hid_t r) {
    write_attr(r, schema::kSchema, rn::kName);
    write_attr(r, schema::kVersion, rn::kVersion);
    const StepperConfig& c = d.config;
    write_attr(r, rn::kTau, c.params.tau);
    write_attr(r, rn::kRing, c.params.ring);
    write_attr(r, rn::kTail, c.params.tail);
    write_attr(r, rn::kSinks, c.params.sinks);
    write_attr(r, rn::kGenMin, c.params.gen_min);
    write_attr(r, rn::kVariant, to_string(c.variant));
    write_attr(r, rn::kPrecision, to_string(c.precision));
    write_attr(r, rn::kPrefill, c.prefill);
    write_attr(r, rn::kLayer, d.layer);
    write_attr(r, rn::kPrefillMode, to_string(c.prefill_mode));
    write_attr(r, rn::kStorage, to_string(c.storage));
    write_attr(r, rn::kTraceSource, d.trace_source);

    const auto S = static_cast<hsize_t>(d.steps), H = static_cast<hsize_t>(d.num_q_heads),
               D = static_cast<hsize_t>(d.head_dim);
    const std::vector<hsize_t> s1 = {S}, sh = {S, H}, shd = {S, H, D};
    // Run dumps are large FP64 arrays that compress poorly; gzip level 1 + shuffle keeps
    // writing fast while still squeezing the int8/int64 columns.
    const int gz = 1;
    write_dataset(r, rn::kPosition, s1, d.position, gz);
    write_dataset(r, rn::kHit, sh, d.hit, gz);
    write_dataset(r, rn::kMatchPos, sh, d.match_pos, gz);
    write_dataset(r, rn::kD2, sh, d.d2, gz);
    write_dataset(r, rn::kOut, shd, d.out, gz);
    write_dataset(r, rn::kLse, sh, d.lse, gz);
    write_dataset(r, rn::kExactOut, shd, d.exact_out, gz);
    write_dataset(r, rn::kExactLse, sh, d.exact_lse, gz);
    write_dataset(r, rn::kKvTokensRead, sh, d.kv_tokens_read, gz);
  });
}

RunDump read_run_dump(const std::string& path) {
  h5::Handle f = h5::open_file(path);
  const hid_t r = f.get();
  check_schema(r, path, rn::kName, rn::kVersion);
  RunDump d;
  StepperConfig& c = d.config;
  c.params.tau = h5::attr_double(r, rn::kTau);
  c.params.ring = h5::attr_int64(r, rn::kRing);
  c.params.tail = h5::attr_int64(r, rn::kTail);
  c.params.sinks = h5::attr_int64(r, rn::kSinks);
  c.params.gen_min = h5::attr_int64(r, rn::kGenMin);
  c.variant = parse_attr(r, path, rn::kVariant, parse_variant);
  c.precision = parse_attr(r, path, rn::kPrecision, parse_precision);
  c.prefill = h5::attr_int64(r, rn::kPrefill);
  d.layer = h5::attr_int64(r, rn::kLayer);
  c.prefill_mode = parse_attr(r, path, rn::kPrefillMode, parse_prefill_mode);
  c.storage = parse_attr(r, path, rn::kStorage, parse_state_storage);
  d.trace_source = h5::attr_string(r, rn::kTraceSource);

  const h5::Dataset pos =
      open_dataset(r, path, rn::kPosition, 1, H5T_INTEGER, 0, "an integer dataset");
  const hsize_t S = pos.dims[0];
  const h5::Dataset out =
      open_dataset(r, path, rn::kOut, 3, H5T_FLOAT, 0, "a floating-point dataset");
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
  read_sh(rn::kHit, H5T_INTEGER, d.hit, false);
  read_sh(rn::kMatchPos, H5T_INTEGER, d.match_pos, false);
  read_sh(rn::kD2, H5T_FLOAT, d.d2, false);
  read_sh(rn::kLse, H5T_FLOAT, d.lse, false);
  read_sh(rn::kExactOut, H5T_FLOAT, d.exact_out, true);
  read_sh(rn::kExactLse, H5T_FLOAT, d.exact_lse, false);
  read_sh(rn::kKvTokensRead, H5T_INTEGER, d.kv_tokens_read, false);
  return d;
}

}  // namespace mac::io
