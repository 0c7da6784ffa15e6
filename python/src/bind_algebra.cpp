// The state algebra (⊕, ⊖), the canonical match distance, BF16 rounding and RoPE over
// numpy arrays: every function takes a batch of any leading shape, the last axis being D.
#include "bindings.hpp"

#include "mac/ref/bf16.hpp"
#include "mac/ref/match.hpp"
#include "mac/ref/rope.hpp"
#include "mac/semantics.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>

namespace macattn {

using mac::InputError;
using mac::msg;
using mac::ref::AttnState;

namespace {

/*! Checks that o is [..., D] (D ≥ 1) and lse has o's leading shape; returns the number of
 *  states. */
size_t check_states(const char* on, const AnyArray& o, const char* ln, const AnyArray& lse) {
  if (o.ndim() < 1 || o.shape(o.ndim() - 1) < 1)
    throw InputError(msg(on, ": shape ", shape_str(o), " where [..., D] with D >= 1 is required"));
  if (shape_of(lse) != leading_shape(o))
    throw InputError(msg(ln, ": shape ", shape_str(lse), " where ", on,
                         "'s leading shape (all but its last axis) is required"));
  return o.size() / o.shape(o.ndim() - 1);
}

void check_same(const char* name, const AnyArray& a, const char* ref_name, const AnyArray& ref) {
  bool same = a.ndim() == ref.ndim();
  for (size_t i = 0; same && i < a.ndim(); ++i) same = a.shape(i) == ref.shape(i);
  if (!same)
    throw InputError(
        msg(name, ": shape ", shape_str(a), " differs from ", ref_name, "'s ", shape_str(ref)));
}

/*! The n states of (o, lse) as AttnState<T>. */
template <typename T>
std::vector<AttnState<T>> states_in(const char* on, const AnyArray& o, const char* ln,
                                    const AnyArray& lse) {
  const size_t n = check_states(on, o, ln, lse), d = o.shape(o.ndim() - 1);
  const auto vo = float_input<T>(on, o), vl = float_input<T>(ln, lse, /*allow_nan=*/true);
  std::vector<AttnState<T>> s(n);
  for (size_t i = 0; i < n; ++i) {
    s[i].o = Eigen::Map<const mac::ref::Vec<T>>(vo.data() + i * d, static_cast<Eigen::Index>(d));
    s[i].lse = vl[i];
  }
  return s;
}

template <typename T>
nb::tuple states_out(const AnyArray& like_o, const std::vector<AttnState<T>>& s) {
  const size_t d = like_o.shape(like_o.ndim() - 1);
  const std::vector<size_t> so = shape_of(like_o);
  T *po = nullptr, *pl = nullptr;
  auto o = new_array_nd<T>(so, &po);
  auto l = new_array_nd<T>(leading_shape(like_o), &pl);
  for (size_t i = 0; i < s.size(); ++i) {
    pl[i] = s[i].lse;
    for (size_t j = 0; j < d; ++j) po[i * d + j] = s[i].o[static_cast<Eigen::Index>(j)];
  }
  return nb::make_tuple(o, l);
}

template <typename T>
nb::tuple merge_t(const AnyArray& o1, const AnyArray& l1, const AnyArray& o2, const AnyArray& l2) {
  check_same("o2", o2, "o1", o1);
  const auto a = states_in<T>("o1", o1, "lse1", l1), b = states_in<T>("o2", o2, "lse2", l2);
  std::vector<AttnState<T>> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = mac::ref::merge(a[i], b[i]);
  return states_out(o1, r);
}

template <typename T>
nb::tuple downdate_t(const AnyArray& ot, const AnyArray& lt, const AnyArray& ow, const AnyArray& lw,
                     std::optional<double> tol) {
  check_same("o_w", ow, "o_total", ot);
  const auto a = states_in<T>("o_total", ot, "lse_total", lt);
  const auto b = states_in<T>("o_w", ow, "lse_w", lw);
  const T t = tol ? static_cast<T>(*tol) : mac::ref::downdate_tolerance<T>();
  if (!(t >= 0)) throw InputError(msg("tol = ", *tol, " must be >= 0"));
  std::vector<AttnState<T>> r(a.size());
  T* pc = nullptr;
  bool* pe = nullptr;
  auto cond = new_array_nd<T>(leading_shape(ot), &pc);
  auto emptied = new_array_nd<bool>(leading_shape(ot), &pe);
  for (size_t i = 0; i < a.size(); ++i) {
    const auto dd = mac::ref::downdate(a[i], b[i], t);
    r[i] = dd.state;
    pc[i] = dd.condition;
    pe[i] = dd.emptied;
  }
  const auto st = states_out(ot, r);
  return nb::make_tuple(st[0], st[1], cond, emptied);
}

/*! d2 of every row of a [..., D] against b's, by `f` (canonical FP32 or FP64). */
template <typename R, typename F>
nb::object distances(const AnyArray& a, const AnyArray& b, F&& f) {
  check_same("b", b, "a", a);
  if (a.ndim() < 1) throw InputError(msg("a: shape ", shape_str(a), " where [..., D] is required"));
  const auto d = static_cast<int64_t>(a.shape(a.ndim() - 1));
  if (!mac::supported_head_dim(d) && !(d % 16 == 0 && d >= 16 && d <= 256))
    throw InputError(msg("a: D = ", d, " must be a multiple of 16 in [16, 256]"));
  const Floats fa = bf16_input("a", a), fb = bf16_input("b", b);
  R* p = nullptr;
  auto out = new_array_nd<R>(leading_shape(a), &p);
  const size_t n = d > 0 ? fa.size / static_cast<size_t>(d) : 0;
  for (size_t i = 0; i < n; ++i) p[i] = f(fa.data + i * d, fb.data + i * d, d);
  // One pair of vectors gives a numpy scalar, not a 0-d array.
  return a.ndim() == 1 ? nb::object(out[nb::tuple()]) : out;
}

template <typename R, typename F>
nb::object map_f32(const char* name, const AnyArray& x, F&& f) {
  if (!is_f32(x)) {
    throw InputError(msg(name, ": dtype ", dtype_str(x), " where float32 is required",
                         is_f64(x) ? " (a float64 would be rounded twice, to float32 then BF16: "
                                     "cast it with .astype(numpy.float32) if that is meant)"
                                   : ""));
  }
  const Floats v = f32_input(name, x, /*allow_nonfinite=*/true);
  R* p = nullptr;
  auto out = new_array_nd<R>(shape_of(x), &p);
  for (size_t i = 0; i < v.size; ++i) p[i] = f(v.data[i]);
  return out;
}

}  // namespace

void bind_algebra(nb::module_& m) {
  m.def(
      "merge",
      [](const AnyArray& o1, const AnyArray& l1, const AnyArray& o2, const AnyArray& l2) {
        if (is_f32(o1)) return merge_t<float>(o1, l1, o2, l2);
        if (is_f64(o1)) return merge_t<double>(o1, l1, o2, l2);
        throw InputError(msg("o1: dtype ", dtype_str(o1), " where float32 or float64 is required"));
      },
      "o1"_a, "lse1"_a, "o2"_a, "lse2"_a,
      "Merge of disjoint key sets (docs/semantics.md §2): states (o [..., D], lse [...]) in "
      "float32 or "
      "float64, natural-log LSE, -inf or NaN = empty. Returns (o, lse).");
  m.def(
      "downdate",
      [](const AnyArray& ot, const AnyArray& lt, const AnyArray& ow, const AnyArray& lw,
         std::optional<double> tol) {
        if (is_f32(ot)) return downdate_t<float>(ot, lt, ow, lw, tol);
        if (is_f64(ot)) return downdate_t<double>(ot, lt, ow, lw, tol);
        throw InputError(
            msg("o_total: dtype ", dtype_str(ot), " where float32 or float64 is required"));
      },
      "o_total"_a, "lse_total"_a, "o_w"_a, "lse_w"_a, "tol"_a = nb::none(),
      "Downdate: removes the keys W from a state over T (docs/semantics.md §2). Returns (o, lse, "
      "condition, emptied); condition = 1/(1-t), emptied where W held all the mass "
      "(1 - t <= tol, default 4 eps).");
  m.def(
      "canonical_d2",
      [](const AnyArray& a, const AnyArray& b) {
        return distances<float>(a, b, [](const float* x, const float* y, int64_t d) {
          return mac::ref::canonical_d2(x, y, d);
        });
      },
      "a"_a, "b"_a,
      "Canonical FP32 squared distance of docs/semantics.md §3.1 between rows of a and b [..., D] "
      "(BF16-exact float32); bit-identical to the CUDA kernel's.");
  m.def(
      "d2_fp64",
      [](const AnyArray& a, const AnyArray& b) {
        return distances<double>(a, b, [](const float* x, const float* y, int64_t d) {
          return mac::ref::d2_fp64(x, y, d);
        });
      },
      "a"_a, "b"_a, "The same distance in FP64 (exact products, FP64 sums).");
  m.def("match_threshold", &mac::match_threshold, "head_dim"_a, "tau"_a,
        "thr = 2·D·(1-tau)² as the FP32 value every implementation compares d2 against.");
  m.def(
      "round_bf16",
      [](const AnyArray& x) {
        return map_f32<float>("x", x, [](float v) { return mac::ref::round_bf16(v); });
      },
      "x"_a, "Rounds float32 values to the nearest BF16 value (ties to even), as float32.");
  m.def(
      "is_bf16_exact",
      [](const AnyArray& x) {
        return map_f32<bool>("x", x, [](float v) { return mac::ref::is_bf16_exact(v); });
      },
      "x"_a, "True where a float32 value is exactly a BF16 value.");
  m.def(
      "bf16_bits",
      [](const AnyArray& x) {
        const Floats v = bf16_input("x", x);
        uint16_t* p = nullptr;
        auto out = new_array_nd<uint16_t>(shape_of(x), &p);
        for (size_t i = 0; i < v.size; ++i) p[i] = mac::ref::bf16_bits(v.data[i]);
        return out;
      },
      "x"_a, "Raw BF16 bits (uint16) of BF16-exact float32 values: the layout of torch.bfloat16.");
  m.def(
      "bf16_from_bits",
      [](const AnyArray& bits) {
        if (bits.dtype() != nb::dtype<uint16_t>() && bits.dtype() != nb::dtype<int16_t>())
          throw InputError(
              msg("bits: dtype ", dtype_str(bits), " where uint16 (raw BF16) is required"));
        const auto v = int_input("bits", bits);
        float* p = nullptr;
        auto out = new_array_nd<float>(shape_of(bits), &p);
        for (size_t i = 0; i < v.size(); ++i)
          p[i] = mac::ref::bf16_from_bits(static_cast<uint16_t>(v[i]));
        return out;
      },
      "bits"_a, "float32 values of raw BF16 bits (uint16).");
  m.def(
      "rope",
      [](const AnyArray& x, const AnyArray& pos, double theta, const std::string& style) {
        const auto st = mac::ref::parse_rope_style(style);
        if (x.ndim() < 1)
          throw InputError(msg("x: shape ", shape_str(x), " where [..., D] is required"));
        const Floats v = f32_input("x", x);
        const auto lead = leading_shape(x);
        const auto p = int_input("pos", pos);
        const size_t rows = x.shape(x.ndim() - 1) > 0 ? v.size / x.shape(x.ndim() - 1) : 0;
        if (pos.ndim() != 0 && shape_of(pos) != lead)
          throw InputError(msg("pos: shape ", shape_str(pos),
                               " where x's leading shape (or a "
                               "single position) is required"));
        const auto d = static_cast<int64_t>(x.shape(x.ndim() - 1));
        float* out = nullptr;
        auto r = new_array_nd<float>(shape_of(x), &out);
        for (size_t i = 0; i < rows; ++i)
          mac::ref::apply_rope(v.data + i * d, out + i * d, d, p[pos.ndim() == 0 ? 0 : i], theta,
                               st);
        return r;
      },
      "x"_a, "pos"_a, "theta"_a = 10000.0, "style"_a = "neox",
      "RoPE of rows x [..., D] (float32) at positions pos (one, or x's leading shape): pair i "
      "rotated by pos·theta^(-2i/D), neox or gptj pairing, evaluated in FP64; no BF16 rounding.");
}

}  // namespace macattn
