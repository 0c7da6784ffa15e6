/*! \file trace_io.cpp
 *  \brief HDF5 (C API, 1.10) reader/writer for the trace file ("mac-trace" v1). Schema:
 *         docs/file-formats.md.
 *
 *  Every failure is one mac::InputError whose message starts with the file name and
 *  names the attribute or dataset. The HDF5 mechanics are mac::h5 (mac/io/h5.hpp).
 */
#include "mac/io/trace_io.hpp"

#include "file_kinds.hpp"
#include "mac/io/atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mac::io {
namespace {

using ref::LayerData;
using ref::Trace;
using ref::TraceMeta;
namespace tr = schema::trace;
using namespace detail;
using h5::shape_str;

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
  L.check_logit_range(m.softmax_scale, file + ": " + base);
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

}  // namespace mac::io
