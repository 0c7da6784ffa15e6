// The reference's data types (TraceMeta, Layer, MacParams, StepperConfig) and mac_io's files:
// the trace (mac-trace v1) and the run dump (mac-run v1) of docs/file-formats.md.
#include "bindings.hpp"

#include "mac/io/run_dump.hpp"
#include "mac/io/trace_io.hpp"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>

namespace macattn {

using mac::InputError;
using mac::msg;
using mac::ref::LayerData;

const LayerData& layer_of(nb::handle layer) {
  if (!nb::isinstance<LayerData>(layer))
    throw InputError(
        msg("layer: a macattn.Layer is required, got ", nb::type_name(layer.type()).c_str()));
  return nb::cast<const LayerData&>(layer);
}

namespace {

/*! Constructs *self from keyword arguments naming its fields, refusing a name it does not
 *  have: a field bound with one def_rw line is a keyword argument too. The fields are set
 *  on a default-constructed instance (nb::init<>, bound first), then copied. */
template <typename T>
void init_from_kwargs(T* self, const nb::kwargs& kw, const char* type) {
  nb::object tmp = nb::type<T>()();
  for (auto [k, v] : kw) {
    if (!nb::hasattr(tmp, k)) throw InputError(msg(type, ": no field '", nb::str(k).c_str(), "'"));
    nb::setattr(tmp, k, v);
  }
  new (self) T(nb::cast<const T&>(tmp));
}

/*! A read-only view [tokens, H, D] of one of a layer's arrays, kept alive by the layer. */
nb::object layer_array(const LayerData& l, const std::vector<float>& a, int64_t heads,
                       nb::handle owner) {
  return view<const float, 3>(
      a.data(),
      {static_cast<size_t>(l.tokens), static_cast<size_t>(heads), static_cast<size_t>(l.head_dim)},
      owner);
}

void copy_into(std::vector<float>& dst, const Floats& src) {
  dst.assign(src.data, src.data + src.size);
}

}  // namespace

void bind_io(nb::module_& m) {
  using mac::MacParams;
  using mac::StepperConfig;
  using mac::ref::TraceMeta;

  nb::class_<MacParams>(
      m, "MacParams",
      "MAC parameters (docs/semantics.md §3): tau, ring (M), tail (r), sinks (F), gen_min, "
      "the policies depth_cap and refresh (§3.3) and the adaptive gate's gate_window, "
      "gate_probe, gate_margin, gate_min_hit and gate_fixed_bytes (§3.5); keyword arguments "
      "set any of them.")
      .def(nb::init<>())
      .def(
          "__init__",
          [](MacParams* self, nb::kwargs kw) { init_from_kwargs(self, kw, "MacParams"); },
          "kwargs"_a)
      .def_rw("tau", &MacParams::tau, "match margin; hit iff d2 < 2·D·(1-tau)²")
      .def_rw("ring", &MacParams::ring, "M, ring capacity (candidates per head)")
      .def_rw("tail", &MacParams::tail, "r, always-exact tail and rectification width")
      .def_rw("sinks", &MacParams::sinks, "F, front sink tokens recomputed every step")
      .def_rw("gen_min", &MacParams::gen_min, "minimum position m for a head to be eligible")
      .def_rw("depth_cap", &MacParams::depth_cap,
              "K: a hit on an entry of chain depth >= K misses (semantics §3.3); -1: no cap")
      .def_rw("refresh", &MacParams::refresh,
              "N: head h misses at m with (m + h*N//Hq) % N == 0 (semantics §3.3); 0: off")
      .def_rw("gate_window", &MacParams::gate_window,
              "W: matched steps per window of the adaptive gate (semantics §3.5), in [0, 4096]; "
              "0: the gate is off")
      .def_rw("gate_probe", &MacParams::gate_probe,
              "P: gated steps before the gate matches again, in [1, 2^31 - 1]")
      .def_rw("gate_margin", &MacParams::gate_margin,
              "mu per mille: off iff 1000 * sum(bytes with MAC) >= mu * sum(full attention's "
              "bytes) over a window, in [1, 10000]")
      .def_rw("gate_min_hit", &MacParams::gate_min_hit,
              "h_min per mille: off iff 1000 * a window's hits < h_min * Hq * W, in [0, 1000]")
      .def_rw("gate_fixed_bytes", &MacParams::gate_fixed_bytes,
              "B_fix: fixed cost of a step in which the match runs, in bytes, in [0, 2^34] "
              "(a batch of B requests shares it: B_fix / B each)")
      .def("validate", &MacParams::validate, "Raises InputError naming the first bad value.")
      .def("__repr__", [](const MacParams& p) {
        return nb::str(
                   "MacParams(tau={!r}, ring={}, tail={}, sinks={}, gen_min={}, depth_cap={}, "
                   "refresh={}, gate_window={}, gate_probe={}, gate_margin={}, gate_min_hit={}, "
                   "gate_fixed_bytes={})")
            .format(p.tau, p.ring, p.tail, p.sinks, p.gen_min, p.depth_cap, p.refresh,
                    p.gate_window, p.gate_probe, p.gate_margin, p.gate_min_hit, p.gate_fixed_bytes);
      });

  nb::class_<StepperConfig>(m, "StepperConfig",
                            "One run of the decode stepper over a layer: params, variant "
                            "(split|downdate), storage (production|full), prefill_mode "
                            "(direct|downdate), precision (fp32|fp64), prefill P. What the run "
                            "dump records.")
      .def(nb::init<>())
      .def(
          "__init__",
          [](StepperConfig* self, nb::kwargs kw) { init_from_kwargs(self, kw, "StepperConfig"); },
          "kwargs"_a)
      .def_rw("params", &StepperConfig::params)
      .def_prop_rw(
          "variant", [](const StepperConfig& c) { return std::string(mac::to_string(c.variant)); },
          [](StepperConfig& c, const std::string& s) { c.variant = mac::parse_variant(s); })
      .def_prop_rw(
          "storage", [](const StepperConfig& c) { return std::string(mac::to_string(c.storage)); },
          [](StepperConfig& c, const std::string& s) { c.storage = mac::parse_state_storage(s); })
      .def_prop_rw(
          "prefill_mode",
          [](const StepperConfig& c) { return std::string(mac::to_string(c.prefill_mode)); },
          [](StepperConfig& c, const std::string& s) {
            c.prefill_mode = mac::parse_prefill_mode(s);
          })
      .def_prop_rw(
          "precision",
          [](const StepperConfig& c) { return std::string(mac::to_string(c.precision)); },
          [](StepperConfig& c, const std::string& s) { c.precision = mac::parse_precision(s); })
      .def_rw("prefill", &StepperConfig::prefill, "P: positions < P are prompt")
      .def("__repr__", [](nb::handle self) {
        const auto& c = nb::cast<const StepperConfig&>(self);
        return nb::str(
                   "StepperConfig(params={!r}, variant={!r}, storage={!r}, "
                   "prefill_mode={!r}, precision={!r}, prefill={})")
            .format(self.attr("params"), mac::to_string(c.variant), mac::to_string(c.storage),
                    mac::to_string(c.prefill_mode), mac::to_string(c.precision), c.prefill);
      });

  nb::class_<TraceMeta>(m, "TraceMeta", "Root attributes of a trace (docs/file-formats.md).")
      .def(nb::init<>())
      .def(
          "__init__",
          [](TraceMeta* self, nb::kwargs kw) { init_from_kwargs(self, kw, "TraceMeta"); },
          "kwargs"_a)
      .def_rw("head_dim", &TraceMeta::head_dim)
      .def_rw("num_q_heads", &TraceMeta::num_q_heads)
      .def_rw("num_kv_heads", &TraceMeta::num_kv_heads)
      .def_rw("num_layers", &TraceMeta::num_layers)
      .def_rw("softmax_scale", &TraceMeta::softmax_scale, "s in exp(s·q·k)")
      .def_rw("rope_theta", &TraceMeta::rope_theta)
      .def_prop_rw(
          "rope_style",
          [](const TraceMeta& t) { return std::string(mac::ref::to_string(t.rope_style)); },
          [](TraceMeta& t, const std::string& s) { t.rope_style = mac::ref::parse_rope_style(s); })
      .def_rw("source", &TraceMeta::source)
      .def_prop_ro("group_size", &TraceMeta::group_size)
      .def("validate", &TraceMeta::validate)
      .def("__repr__", [](const TraceMeta& t) {
        return nb::str(
                   "TraceMeta(head_dim={}, num_q_heads={}, num_kv_heads={}, num_layers={}, "
                   "softmax_scale={!r}, rope_theta={!r}, rope_style={!r}, source={!r})")
            .format(t.head_dim, t.num_q_heads, t.num_kv_heads, t.num_layers, t.softmax_scale,
                    t.rope_theta, mac::ref::to_string(t.rope_style), t.source);
      });

  nb::class_<LayerData>(m, "Layer",
                        "One layer of a trace: q_pre, q_post [T, Hq, D] and k (post-RoPE), v "
                        "[T, Hkv, D], BF16-exact float32, read-only.")
      .def(
          "__init__",
          [](LayerData* self, const AnyArray& q_pre, const AnyArray& q_post, const AnyArray& k,
             const AnyArray& v) {
            check_shape("q_pre", q_pre, {-1, -1, -1}, "[T, Hq, D]");
            const auto T = static_cast<int64_t>(q_pre.shape(0)),
                       hq = static_cast<int64_t>(q_pre.shape(1)),
                       d = static_cast<int64_t>(q_pre.shape(2));
            check_shape("q_post", q_post, {T, hq, d}, "[T, Hq, D]");
            check_shape("k", k, {T, -1, d}, "[T, Hkv, D]");
            const auto hkv = static_cast<int64_t>(k.shape(1));
            check_shape("v", v, {T, hkv, d}, "[T, Hkv, D]");
            LayerData l;
            l.tokens = T;
            l.num_q_heads = hq;
            l.num_kv_heads = hkv;
            l.head_dim = d;
            copy_into(l.q_pre, bf16_input("q_pre", q_pre));
            copy_into(l.q_post, bf16_input("q_post", q_post));
            copy_into(l.k, bf16_input("k", k));
            copy_into(l.v, bf16_input("v", v));
            l.validate("layer");
            new (self) LayerData(std::move(l));
          },
          "q_pre"_a, "q_post"_a, "k"_a, "v"_a)
      .def_ro("tokens", &LayerData::tokens)
      .def_ro("num_q_heads", &LayerData::num_q_heads)
      .def_ro("num_kv_heads", &LayerData::num_kv_heads)
      .def_ro("head_dim", &LayerData::head_dim)
      .def_prop_ro("group_size", &LayerData::group_size)
      .def_prop_ro("q_pre",
                   [](nb::handle self) {
                     const auto& l = nb::cast<const LayerData&>(self);
                     return layer_array(l, l.q_pre, l.num_q_heads, self);
                   })
      .def_prop_ro("q_post",
                   [](nb::handle self) {
                     const auto& l = nb::cast<const LayerData&>(self);
                     return layer_array(l, l.q_post, l.num_q_heads, self);
                   })
      .def_prop_ro("k",
                   [](nb::handle self) {
                     const auto& l = nb::cast<const LayerData&>(self);
                     return layer_array(l, l.k, l.num_kv_heads, self);
                   })
      .def_prop_ro("v",
                   [](nb::handle self) {
                     const auto& l = nb::cast<const LayerData&>(self);
                     return layer_array(l, l.v, l.num_kv_heads, self);
                   })
      .def("__repr__", [](const LayerData& l) {
        return msg("Layer(tokens=", l.tokens, ", num_q_heads=", l.num_q_heads,
                   ", num_kv_heads=", l.num_kv_heads, ", head_dim=", l.head_dim, ")");
      });

  m.def("read_trace_meta", &mac::io::read_trace_meta, "path"_a,
        "Root attributes of a trace file (validated).");
  m.def(
      "read_trace_layer",
      [](const std::string& path, int64_t layer, int64_t max_tokens) {
        nb::gil_scoped_release nogil;
        return mac::io::read_trace_layer(path, layer, max_tokens);
      },
      "path"_a, "layer"_a, "max_tokens"_a = 0,
      "One layer of a trace file (validated); max_tokens > 0 keeps the first positions only.");
  m.def(
      "read_trace",
      [](const std::string& path, const std::vector<int64_t>& layers, int64_t max_tokens) {
        mac::ref::Trace t;
        {
          nb::gil_scoped_release nogil;
          t = mac::io::read_trace(path, layers, max_tokens);
        }
        nb::list out;
        for (auto& l : t.layers) out.append(nb::cast(std::move(l)));
        return nb::make_tuple(t.meta, out);
      },
      "path"_a, "layers"_a = std::vector<int64_t>{}, "max_tokens"_a = 0,
      "(meta, [Layer]) of a trace file; `layers` selects layers (empty: all), in that order.");
  m.def(
      "write_trace",
      [](const std::string& path, const TraceMeta& meta,
         const std::vector<const LayerData*>& layers, bool compress,
         const std::map<std::string, std::string>& extra_attrs) {
        mac::ref::Trace t;
        t.meta = meta;
        t.meta.num_layers = static_cast<int64_t>(layers.size());
        for (const LayerData* l : layers) {
          if (l == nullptr) throw InputError("write_trace: a layer is None");
          t.layers.push_back(*l);
        }
        nb::gil_scoped_release nogil;
        mac::io::write_trace(path, t, compress, extra_attrs);
      },
      "path"_a, "meta"_a, "layers"_a, "compress"_a = true,
      "extra_attrs"_a = std::map<std::string, std::string>{},
      "Writes a trace file (temporary name, renamed when complete); meta.num_layers is set "
      "from the layers given.");

  using mac::io::RunDump;
  nb::class_<RunDump> rd(
      m, "RunDump",
      "Run dump of one layer (docs/file-formats.md, mac-run v1): the configuration and, "
      "over steps S and query heads Hq, writable arrays position [S], hit "
      "[S, Hq] int8, match_pos [S, Hq] (-1 on miss), d2 [S, Hq] (NaN if no "
      "candidate), out [S, Hq, D], lse [S, Hq] (natural log), exact_out, "
      "exact_lse (FP64 full attention), kv_tokens_read [S, Hq].");
  rd.def(
        "__init__",
        [](RunDump* self, int64_t steps, int64_t num_q_heads, int64_t head_dim) {
          mac::require(steps >= 0 && num_q_heads >= 1 && head_dim >= 1, "RunDump(steps = ", steps,
                       ", num_q_heads = ", num_q_heads, ", head_dim = ", head_dim,
                       "): steps >= 0 and the others >= 1 are required");
          new (self) RunDump();
          self->resize(steps, num_q_heads, head_dim);
        },
        "steps"_a, "num_q_heads"_a, "head_dim"_a)
      .def_rw("config", &RunDump::config)
      .def_rw("layer", &RunDump::layer)
      .def_rw("trace_source", &RunDump::trace_source)
      .def_ro("steps", &RunDump::steps)
      .def_ro("num_q_heads", &RunDump::num_q_heads)
      .def_ro("head_dim", &RunDump::head_dim);
  // The arrays: writable views [S], [S, Hq] or [S, Hq, D] kept alive by the dump.
#define MACATTN_DUMP_ARRAY(name, T, N)                                                  \
  rd.def_prop_ro(#name, [](nb::handle self) {                                           \
    auto& d = nb::cast<RunDump&>(self);                                                 \
    const size_t all[3] = {size_t(d.steps), size_t(d.num_q_heads), size_t(d.head_dim)}; \
    std::array<size_t, N> shape;                                                        \
    std::copy(all, all + N, shape.begin());                                             \
    return view<T, N>(d.name.data(), shape, self);                                      \
  })
  MACATTN_DUMP_ARRAY(position, int64_t, 1);
  MACATTN_DUMP_ARRAY(hit, int8_t, 2);
  MACATTN_DUMP_ARRAY(match_pos, int64_t, 2);
  MACATTN_DUMP_ARRAY(d2, double, 2);
  MACATTN_DUMP_ARRAY(out, double, 3);
  MACATTN_DUMP_ARRAY(lse, double, 2);
  MACATTN_DUMP_ARRAY(exact_out, double, 3);
  MACATTN_DUMP_ARRAY(exact_lse, double, 2);
  MACATTN_DUMP_ARRAY(kv_tokens_read, int64_t, 2);
#undef MACATTN_DUMP_ARRAY
  rd.def("__repr__", [](const RunDump& d) {
    return msg("RunDump(steps=", d.steps, ", num_q_heads=", d.num_q_heads,
               ", head_dim=", d.head_dim, ", layer=", d.layer, ")");
  });
  m.def("read_run_dump", &mac::io::read_run_dump, "path"_a,
        "Reads a run dump, checking schema, version and shapes.");
  m.def(
      "write_run_dump",
      [](const std::string& path, const RunDump& d) {
        nb::gil_scoped_release nogil;
        mac::io::write_run_dump(path, d);
      },
      "path"_a, "dump"_a, "Writes a run dump (temporary name, renamed when complete).");
}

}  // namespace macattn
