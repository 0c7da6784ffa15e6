// The FP64 oracle (docs/semantics.md §2, §3; docs/oracle.md): exact attention and the MAC algebra
// of given hit decisions, with compensated sums.
#include "bindings.hpp"

#include "mac/oracle/oracle.hpp"

#include <nanobind/stl/optional.h>

#include <memory>
#include <optional>

namespace macattn {

using mac::InputError;
using mac::msg;
using mac::require;
using mac::oracle::State;

namespace {

/*! A MacOracle over a Layer that the Python object `layer` keeps alive. */
struct Oracle {
  nb::object layer_obj;
  std::unique_ptr<mac::oracle::MacOracle> oracle;
};

/*! One oracle step's per-head results. */
struct OracleStep {
  mac::oracle::StepResult r;
  size_t d = 0;
  template <typename R, typename F>
  nb::object per_head(F&& f) const {
    R* p = nullptr;
    auto a = new_array<R, 1>({r.heads.size()}, &p);
    for (size_t h = 0; h < r.heads.size(); ++h) p[h] = static_cast<R>(f(r.heads[h]));
    return a;
  }
  template <typename Get>
  nb::tuple state(Get&& get) const {
    return states_to_numpy<double>(r.heads.size(), d,
                                   [&](size_t h) -> const State& { return get(r.heads[h]); });
  }
};

}  // namespace

// One OracleStep attribute: an [Hq] array of a HeadResult field, or a state (o, lse).
#define MACATTN_ORACLE_PER_HEAD(name, R)                        \
  def_prop_ro(#name, [](const OracleStep& s) {                  \
    return s.per_head<R>([](const auto& h) { return h.name; }); \
  })
#define MACATTN_ORACLE_STATE(name, doc)                                       \
  def_prop_ro(                                                                \
      #name,                                                                  \
      [](const OracleStep& s) {                                               \
        return s.state([](const auto& h) -> const State& { return h.name; }); \
      },                                                                      \
      doc)

void bind_oracle(nb::module_& m) {
  m.def(
      "oracle_attend",
      [](nb::handle layer, int64_t kv_head, const AnyArray& q, double softmax_scale, int64_t a,
         int64_t b) {
        const auto& l = layer_of(layer);
        check_shape("q", q, {l.head_dim}, "[D]");
        require(kv_head >= 0 && kv_head < l.num_kv_heads, "kv_head = ", kv_head, " outside [0, ",
                l.num_kv_heads, ")");
        const Floats fq = bf16_input("q", q);
        State s;
        {
          nb::gil_scoped_release nogil;
          s = mac::oracle::attend(l, kv_head, fq.data, softmax_scale, a, b);
        }
        auto t = states_to_numpy<double>(1, static_cast<size_t>(l.head_dim),
                                         [&](size_t) -> const State& { return s; });
        return nb::make_tuple(t[0].attr("reshape")(l.head_dim), s.lse);
      },
      "layer"_a, "kv_head"_a, "q"_a, "softmax_scale"_a, "a"_a, "b"_a,
      "Exact attn(q, [a, b)) over a KV head in FP64 (compensated sums): (o [D], lse).");
  m.def(
      "oracle_full_attention",
      [](nb::handle layer, double softmax_scale, int64_t pos) {
        const auto& l = layer_of(layer);
        std::vector<State> s;
        {
          nb::gil_scoped_release nogil;
          s = mac::oracle::full_attention(l, softmax_scale, pos);
        }
        return states_to_numpy<double>(s.size(), static_cast<size_t>(l.head_dim),
                                       [&](size_t h) -> const State& { return s[h]; });
      },
      "layer"_a, "softmax_scale"_a, "m"_a,
      "Exact full attention of every query head at position m, attn(q_post(m, h), [0, m]) in "
      "FP64: (o [Hq, D], lse [Hq]).");

  nb::class_<OracleStep>(m, "OracleStep",
                         "One oracle step: per-head arrays [Hq] and FP64 states (o [Hq, D], "
                         "lse [Hq]).")
      .def_prop_ro("position", [](const OracleStep& s) { return s.r.position; })
      .def_prop_ro(
          "hit",
          [](const OracleStep& s) { return s.per_head<bool>([](const auto& h) { return h.hit; }); })
      .MACATTN_ORACLE_PER_HEAD(match_pos, int64_t)
      .MACATTN_ORACLE_PER_HEAD(band_begin, int64_t)
      .MACATTN_ORACLE_PER_HEAD(band_end, int64_t)
      .MACATTN_ORACLE_PER_HEAD(sink_end, int64_t)
      .MACATTN_ORACLE_PER_HEAD(tail_begin, int64_t)
      .MACATTN_ORACLE_PER_HEAD(keys_read, int64_t)
      .MACATTN_ORACLE_PER_HEAD(wrote_entry, bool)
      .MACATTN_ORACLE_STATE(entry, "prefix ⊕ band over [Fe(E(m)), E(m)), exact (written iff ready)")
      .MACATTN_ORACLE_STATE(out, "the MAC output of these decisions, exact")
      .MACATTN_ORACLE_STATE(exact, "full attention attn(q_m, [0, m]), exact");

  nb::class_<Oracle>(
      m, "MacOracle",
      "The MAC algebra of docs/semantics.md §3 for given hit decisions in FP64, with its own "
      "ring of exact entries.")
      .def(
          "__init__",
          [](Oracle* self, nb::object layer, double softmax_scale, const mac::MacParams& params,
             int64_t prefill) {
            const auto& l = layer_of(layer);
            auto o = std::make_unique<mac::oracle::MacOracle>(l, softmax_scale, params, prefill);
            new (self) Oracle{std::move(layer), std::move(o)};
          },
          "layer"_a, "softmax_scale"_a, "params"_a, "prefill"_a,
          "Builds exact prefill entries for [max(0, P-M), P).")
      .def(
          "step",
          [](Oracle& self, int64_t pos, const AnyArray& hit, const AnyArray& match_pos,
             std::optional<AnyArray> ready) {
            const auto& l = nb::cast<const mac::ref::LayerData&>(self.layer_obj);
            const int64_t hq = l.num_q_heads;
            check_shape("hit", hit, {hq}, "[Hq]");
            check_shape("match_pos", match_pos, {hq}, "[Hq]");
            if (ready) check_shape("ready", *ready, {hq}, "[Hq]");
            const auto h = bool_input("hit", hit);
            const auto p = int_input("match_pos", match_pos);
            const auto r = ready ? bool_input("ready", *ready) : std::vector<uint8_t>(hq, 1);
            std::vector<mac::oracle::Decision> dec(static_cast<size_t>(hq));
            for (size_t i = 0; i < dec.size(); ++i) dec[i] = {h[i] != 0, p[i], r[i] != 0};
            OracleStep s;
            s.d = static_cast<size_t>(l.head_dim);
            {
              nb::gil_scoped_release nogil;
              s.r = self.oracle->step(pos, dec);
            }
            return s;
          },
          "m"_a, "hit"_a, "match_pos"_a, "ready"_a = nb::none(),
          "Evaluates position m for the given decisions (hit [Hq] bool, match_pos [Hq], ready "
          "[Hq] bool, default all ready). Raises InputError on a decision no conforming "
          "implementation can make.")
      .def(
          "entry",
          [](const Oracle& self, int64_t head, int64_t pos) -> nb::object {
            const auto& l = nb::cast<const mac::ref::LayerData&>(self.layer_obj);
            require(head >= 0 && head < l.num_q_heads, "head = ", head, " outside [0, ",
                    l.num_q_heads, ")");
            const State* e = self.oracle->entry(head, pos);
            if (e == nullptr) return nb::none();
            auto t = states_to_numpy<double>(1, static_cast<size_t>(l.head_dim),
                                             [&](size_t) -> const State& { return *e; });
            return nb::make_tuple(t[0].attr("reshape")(l.head_dim), e->lse);
          },
          "head"_a, "pos"_a, "(o [D], lse) of the exact entry of pos, or None if not held.")
      .def_prop_ro("layer", [](const Oracle& self) { return self.layer_obj; });
}

}  // namespace macattn
