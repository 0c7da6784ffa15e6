// The reference decode stepper (docs/semantics.md §3) step by step, over a recorded layer or over
// one a model appends to position by position, and its per-head results as numpy arrays.
#include "bindings.hpp"

#include "mac/ref/stepper.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <limits>
#include <memory>
#include <optional>
#include <variant>

namespace macattn {

using mac::InputError;
using mac::msg;
using mac::require;
using mac::ref::AttnState;
using mac::ref::DecodeStepper;
using mac::ref::GateStep;
using mac::ref::HeadStep;
using mac::ref::LayerData;
using mac::ref::StepResult;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/*! The gate's state of one (request, layer) as a dict (mac::GateState's fields). */
nb::dict gate_state_dict(const mac::GateState& g) {
  nb::dict d;
  d["bytes_mac"] = g.bytes_mac;
  d["bytes_full"] = g.bytes_full;
  d["hits"] = g.hits;
  d["steps"] = g.steps;
  d["off_left"] = g.off_left;
  return d;
}

/*! One decode step's results for all heads, in the stepper's precision T. */
class Step {
 public:
  template <typename T>
  Step(StepResult<T>&& r, int64_t head_dim, float threshold)
      : r_(std::move(r)), d_(head_dim), thr_(threshold) {}

  int64_t position() const {
    return std::visit([](const auto& r) { return r.position; }, r_);
  }
  size_t heads() const {
    return std::visit([](const auto& r) { return r.heads.size(); }, r_);
  }
  float threshold() const { return thr_; }
  bool fp64() const { return std::holds_alternative<StepResult<double>>(r_); }
  const GateStep& gate() const {
    return std::visit([](const auto& r) -> const GateStep& { return r.gate; }, r_);
  }

  /*! [Hq] array of f(head) for every head. */
  template <typename R, typename F>
  nb::object per_head(F&& f) const {
    return std::visit(
        [&](const auto& r) {
          R* p = nullptr;
          auto a = new_array<R, 1>({r.heads.size()}, &p);
          for (size_t h = 0; h < r.heads.size(); ++h) p[h] = static_cast<R>(f(r.heads[h]));
          return a;
        },
        r_);
  }

  /*! (o [Hq, D], lse [Hq]) of the state member `get(head)` in the stepper's precision. */
  template <typename Get>
  nb::tuple state(Get&& get) const {
    return std::visit(
        [&](const auto& r) {
          using T = std::decay_t<decltype(r.heads[0].out.lse)>;
          return states_to_numpy<T>(
              r.heads.size(), static_cast<size_t>(d_),
              [&](size_t h) -> const AttnState<T>& { return get(r.heads[h]); });
        },
        r_);
  }

 private:
  std::variant<StepResult<float>, StepResult<double>> r_;
  int64_t d_;
  float thr_;
};

/*! A DecodeStepper over a layer held by a Python Layer object: a recorded one (trace mode),
 *  or one it owns whose arrays are allocated for `capacity` positions up front and filled by
 *  append (incremental mode), so that the ring's q_pre pointers into it never move. */
class Stepper {
 public:
  Stepper(nb::object layer, double scale, const mac::StepperConfig& cfg, int64_t capacity)
      : layer_obj_(std::move(layer)),
        layer_(&nb::cast<LayerData&>(layer_obj_)),
        capacity_(capacity),
        cfg_(cfg) {
    if (cfg.precision == mac::Precision::kFp32)
      f32_ = std::make_unique<DecodeStepper<float>>(*layer_, scale, cfg.params, cfg.variant,
                                                    cfg.storage);
    else
      f64_ = std::make_unique<DecodeStepper<double>>(*layer_, scale, cfg.params, cfg.variant,
                                                     cfg.storage);
    scale_ = scale;
  }

  bool incremental() const { return capacity_ > 0; }
  int64_t capacity() const { return capacity_; }
  int64_t tokens() const { return layer_->tokens; }
  double scale() const { return scale_; }
  const mac::StepperConfig& config() const { return cfg_; }
  nb::object layer() const { return layer_obj_; }
  const mac::GateState& gate_state() const {
    return f32_ ? f32_->gate_state() : f64_->gate_state();
  }

  void prefill(std::optional<int64_t> P, const std::string& mode) {
    const auto pm = mac::parse_prefill_mode(mode);
    const int64_t p = P.value_or(layer_->tokens);
    nb::gil_scoped_release nogil;
    if (f32_)
      f32_->prefill(p, pm);
    else
      f64_->prefill(p, pm);
    cfg_.prefill = p;
    cfg_.prefill_mode = pm;
  }

  Step step(std::optional<int64_t> m, bool ready) {
    const int64_t pos = m.value_or(layer_->tokens - 1);
    const float thr = mac::match_threshold(layer_->head_dim, cfg_.params.tau);
    nb::gil_scoped_release nogil;
    if (f32_) return Step(f32_->step(pos, ready), layer_->head_dim, thr);
    return Step(f64_->step(pos, ready), layer_->head_dim, thr);
  }

  int64_t append(const AnyArray& q_pre, const AnyArray& q_post, const AnyArray& k,
                 const AnyArray& v) {
    require(incremental(),
            "append: this Stepper steps over a recorded layer; make one with "
            "Stepper.incremental(...) to append positions");
    LayerData& l = *layer_;
    const bool one = q_pre.ndim() == 2;  // [Hq, D]: one position
    const int64_t hq = l.num_q_heads, hkv = l.num_kv_heads, d = l.head_dim;
    if (one) {
      check_shape("q_pre", q_pre, {hq, d}, "[Hq, D]");
      check_shape("q_post", q_post, {hq, d}, "[Hq, D]");
      check_shape("k", k, {hkv, d}, "[Hkv, D]");
      check_shape("v", v, {hkv, d}, "[Hkv, D]");
    } else {
      check_shape("q_pre", q_pre, {-1, hq, d}, "[n, Hq, D] or [Hq, D]");
    }
    const int64_t n = one ? 1 : static_cast<int64_t>(q_pre.shape(0));
    if (!one) {
      check_shape("q_post", q_post, {n, hq, d}, "[n, Hq, D]");
      check_shape("k", k, {n, hkv, d}, "[n, Hkv, D]");
      check_shape("v", v, {n, hkv, d}, "[n, Hkv, D]");
    }
    require(l.tokens + n <= capacity_, "append: positions [", l.tokens, ", ", l.tokens + n,
            ") exceed max_tokens = ", capacity_, " declared when the Stepper was made");
    const Floats a = bf16_input("q_pre", q_pre), b = bf16_input("q_post", q_post),
                 c = bf16_input("k", k), e = bf16_input("v", v);
    const auto t0 = static_cast<size_t>(l.tokens);
    std::copy(a.data, a.data + a.size, l.q_pre.begin() + t0 * hq * d);
    std::copy(b.data, b.data + b.size, l.q_post.begin() + t0 * hq * d);
    std::copy(c.data, c.data + c.size, l.k.begin() + t0 * hkv * d);
    std::copy(e.data, e.data + e.size, l.v.begin() + t0 * hkv * d);
    l.tokens += n;
    return static_cast<int64_t>(t0);
  }

  /*! The ring entry of `pos` for query head `head`, or None if its slot holds another. */
  nb::object ring_entry(nb::handle self, int64_t head, int64_t pos) const {
    require(head >= 0 && head < layer_->num_q_heads, "head = ", head, " outside [0, ",
            layer_->num_q_heads, ")");
    require(pos >= 0, "pos = ", pos, " must be >= 0");
    auto get = [&](const auto& st) -> nb::object {
      const auto* e = st->ring().find(head, pos);
      if (e == nullptr) return nb::none();
      const auto d = static_cast<size_t>(layer_->head_dim);
      using T = std::decay_t<decltype(e->state.lse)>;
      auto o = states_to_numpy<T>(1, d, [&](size_t) -> const AttnState<T>& { return e->state; });
      nb::dict r;
      r["pos"] = e->pos;
      r["q_pre"] = view<const float, 1>(e->q_pre, {d}, self);
      r["o"] = o[0].attr("reshape")(d);
      r["lse"] = o[1].attr("item")();
      r["depth"] = e->depth;
      return r;
    };
    return f32_ ? get(f32_) : get(f64_);
  }

 private:
  nb::object layer_obj_;
  LayerData* layer_;
  int64_t capacity_ = 0;  // > 0: incremental mode
  double scale_ = 0;
  mac::StepperConfig cfg_;
  std::unique_ptr<DecodeStepper<float>> f32_;
  std::unique_ptr<DecodeStepper<double>> f64_;
};

mac::StepperConfig make_config(const mac::MacParams& params, const std::string& variant,
                               const std::string& storage, const std::string& precision) {
  mac::StepperConfig c;
  c.params = params;
  c.variant = mac::parse_variant(variant);
  c.storage = mac::parse_state_storage(storage);
  c.precision = mac::parse_precision(precision);
  return c;
}

}  // namespace

// One Step attribute: an [Hq] array of `expr` over heads h, or a state (o, lse) member.
#define MACATTN_PER_HEAD(name, R, expr, doc) \
  def_prop_ro(                               \
      #name, [](const Step& s) { return s.per_head<R>([](const auto& h) { return expr; }); }, doc)
#define MACATTN_STATE(name, doc)                                                                  \
  def_prop_ro(                                                                                    \
      #name,                                                                                      \
      [](const Step& s) { return s.state([](const auto& h) -> const auto& { return h.name; }); }, \
      doc)

void bind_stepper(nb::module_& m) {
  nb::class_<Step>(m, "Step",
                   "One decode step of the reference stepper: per query head h, arrays [Hq] "
                   "and states (o [Hq, D], lse [Hq]) in the stepper's precision (float32 or "
                   "float64), natural-log LSE, empty = (0, -inf).")
      .def_prop_ro("position", &Step::position, "m, the position decoded")
      .def_prop_ro("num_heads", &Step::heads)
      .def_prop_ro("threshold", &Step::threshold, "thr = 2·D·(1-tau)² (FP32)")
      .MACATTN_PER_HEAD(eligible, bool, h.eligible, "m >= gen_min, ready, and a candidate exists")
      .def_prop_ro(
          "hit",
          [](const Step& s) { return s.per_head<bool>([](const auto& h) { return h.hit; }); })
      .MACATTN_PER_HEAD(policy, int8_t, h.policy,
                        "why an eligible head missed by rule rather than by its match: 0 none, "
                        "1 refresh due, 2 depth cap (semantics §3.3), 3 gated: the adaptive gate "
                        "ran the step without the match (§3.5)")
      .MACATTN_PER_HEAD(has_candidate, bool, h.match.has_candidate, "")
      .MACATTN_PER_HEAD(best_pos, int64_t, h.match.best_pos,
                        "nearest candidate argmin (d2, p), -1 if none (hit or not)")
      .MACATTN_PER_HEAD(match_pos, int64_t, h.match_pos, "matched position on a hit, -1 on a miss")
      .def_prop_ro(
          "d2",
          [](const Step& s) {
            return s.per_head<float>([](const auto& h) {
              return h.match.has_candidate ? h.match.d2 : std::numeric_limits<float>::quiet_NaN();
            });
          },
          "canonical FP32 d2 of the nearest candidate (NaN if none searched)")
      .def_prop_ro("d2_fp64",
                   [](const Step& s) {
                     return s.per_head<double>([](const auto& h) {
                       return h.match.has_candidate ? h.match.d2_fp64 : kNaN;
                     });
                   })
      .def_prop_ro(
          "margin",
          [](const Step& s) {
            return s.per_head<double>(
                [](const auto& h) { return h.match.has_candidate ? h.match.margin : kNaN; });
          },
          "thr - d2_fp64 (> 0: inside the threshold)")
      .MACATTN_PER_HEAD(below_threshold, bool, h.match.below_threshold,
                        "d2 < thr: a hit if the entry is usable")
      .MACATTN_PER_HEAD(band_begin, int64_t, h.band_begin, "")
      .MACATTN_PER_HEAD(band_end, int64_t, h.band_end, "")
      .MACATTN_PER_HEAD(sink_end, int64_t, h.sink_end, "sinks are [0, sink_end)")
      .MACATTN_PER_HEAD(tail_begin, int64_t, h.tail_begin, "the tail is [tail_begin, m]")
      .MACATTN_PER_HEAD(keys_read, int64_t, h.keys_read, "")
      .MACATTN_PER_HEAD(
          depth, int64_t, h.depth,
          "chain depth of the entry written: 0 from a miss, k+1 from a hit on depth k")
      .MACATTN_PER_HEAD(wrote_entry, bool, h.wrote_entry, "")
      .MACATTN_STATE(prefix, "(o, lse) reused from the ring (empty on a miss)")
      .MACATTN_STATE(band, "(o, lse) = attn(q_m, [band_begin, band_end))")
      .MACATTN_STATE(sink, "(o, lse) = attn(q_m, [0, sink_end))")
      .MACATTN_STATE(tail, "(o, lse) = attn(q_m, [tail_begin, m])")
      .MACATTN_STATE(entry,
                     "(o, lse) of entry(m) as stored in the ring (empty where none was written)")
      .MACATTN_STATE(out, "(o, lse): the output ((prefix ⊕ band) ⊕ sink) ⊕ tail")
      // The adaptive gate's part of the step (semantics §3.5): scalars of the whole step.
      .def_prop_ro(
          "gate_mode", [](const Step& s) { return static_cast<int>(s.gate().mode); },
          "the gate's mode at this step: 0 none (gate off, or the step not eligible), 1 on "
          "(the match ran and the step counts in the window), 2 off (gated by a window that did "
          "not pay), 3 floor (gated: no decision of this step could pay); mac-sim's JSON "
          "step_mode")
      .def_prop_ro(
          "gated", [](const Step& s) { return mac::gate_gated(s.gate().mode); },
          "gate_mode is off or floor: every eligible head missed with policy 3, no match ran")
      .def_prop_ro(
          "gate_hits", [](const Step& s) { return s.gate().hits; }, "heads that hit")
      .def_prop_ro(
          "gate_group_keys", [](const Step& s) { return s.gate().group_keys; },
          "the keys the KV groups read, summed: each group its sinks and [lo, m], lo its heads' "
          "least band start")
      .def_prop_ro(
          "gate_bytes", [](const Step& s) { return s.gate().bytes; },
          "the byte model's bytes of the step as run: with MAC where the match ran, else full "
          "attention's plus the entry writes when ready; mac-sim's JSON step_bytes")
      .def_prop_ro(
          "gate_bytes_full", [](const Step& s) { return s.gate().bytes_full; },
          "full attention's K/V bytes at m: Hkv * 4D * (m + 1)")
      .def_prop_ro(
          "gate_state", [](const Step& s) { return gate_state_dict(s.gate().state); },
          "the gate's state after the step: dict of bytes_mac, bytes_full, hits, steps "
          "(the current window's sums) and off_left (gated steps still to run; 0: on)");

  nb::class_<Stepper>(
      m, "Stepper",
      "The reference decode stepper of docs/semantics.md §3 over one layer, all query "
      "heads, one request.")
      .def(
          "__init__",
          [](Stepper* self, nb::object layer, double softmax_scale, const mac::MacParams& params,
             const std::string& variant, const std::string& storage, const std::string& precision) {
            layer_of(layer);  // type check with a clear message
            new (self) Stepper(std::move(layer), softmax_scale,
                               make_config(params, variant, storage, precision), 0);
          },
          "layer"_a, "softmax_scale"_a, "params"_a = mac::MacParams(), "variant"_a = "split",
          "storage"_a = "production", "precision"_a = "fp32",
          "A stepper over a recorded Layer (kept alive by the stepper).")
      .def_static(
          "incremental",
          [](int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t max_tokens,
             double softmax_scale, const mac::MacParams& params, const std::string& variant,
             const std::string& storage, const std::string& precision) {
            require(max_tokens >= 1, "max_tokens = ", max_tokens, " must be >= 1");
            require(num_q_heads >= 1 && num_kv_heads >= 1 && head_dim >= 1,
                    "num_q_heads = ", num_q_heads, ", num_kv_heads = ", num_kv_heads,
                    ", head_dim = ", head_dim, " must all be >= 1");
            // Every array sized for max_tokens now: the ring's q_pre pointers into them stay
            // valid while positions are appended (tokens counts the filled ones).
            LayerData l;
            l.resize(max_tokens, num_q_heads, num_kv_heads, head_dim);
            l.tokens = 0;
            nb::object layer = nb::cast(std::move(l));
            return std::make_unique<Stepper>(std::move(layer), softmax_scale,
                                             make_config(params, variant, storage, precision),
                                             max_tokens);
          },
          "num_q_heads"_a, "num_kv_heads"_a, "head_dim"_a, "max_tokens"_a, "softmax_scale"_a,
          "params"_a = mac::MacParams(), "variant"_a = "split", "storage"_a = "production",
          "precision"_a = "fp32",
          "A stepper over a layer the caller fills position by position with append(), for "
          "up to max_tokens positions (storage for all of them is allocated now).")
      .def("append", &Stepper::append, "q_pre"_a, "q_post"_a, "k"_a, "v"_a,
           "Appends positions: q_pre, q_post [n, Hq, D] or [Hq, D], k (post-RoPE), v [n, Hkv, "
           "D] or [Hkv, D], BF16-exact. Returns the first position appended.")
      .def("prefill", &Stepper::prefill, "P"_a = nb::none(), "mode"_a = "direct",
           "Builds ring entries for prompt positions [max(0, P-M), P) (default P: every position "
           "held); mode direct | downdate. Before the first step.")
      .def("step", &Stepper::step, "m"_a = nb::none(), "ready"_a = true,
           "Decodes position m (default: the last one held) for every head; ready=False makes "
           "every head an exact miss that writes no entry. Returns a Step.")
      .def(
          "ring_entry",
          [](nb::handle self, int64_t head, int64_t pos) {
            return nb::cast<const Stepper&>(self).ring_entry(self, head, pos);
          },
          "head"_a, "pos"_a,
          "The ring entry of position pos for a query head as a dict (pos, q_pre, o, lse, "
          "depth), or None if its slot holds another position.")
      .def_prop_ro("layer", &Stepper::layer)
      .def_prop_ro("tokens", &Stepper::tokens, "positions held")
      .def_prop_ro("max_tokens", &Stepper::capacity,
                   "capacity of an incremental stepper (0 "
                   "for one over a recorded layer)")
      .def_prop_ro("softmax_scale", &Stepper::scale)
      .def_prop_ro(
          "gate_state", [](const Stepper& s) { return gate_state_dict(s.gate_state()); },
          "the adaptive gate's state as the last step left it (zero before the first step): "
          "dict of bytes_mac, bytes_full, hits, steps, off_left")
      .def_prop_ro("config", &Stepper::config);
}

}  // namespace macattn
