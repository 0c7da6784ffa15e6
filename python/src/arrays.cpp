#include "arrays.hpp"

#include "mac/ref/bf16.hpp"

#include <cmath>
#include <limits>

namespace macattn {

using mac::InputError;
using mac::msg;

std::string shape_str(const AnyArray& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

std::string dtype_str(const AnyArray& a) {
  const auto d = a.dtype();
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: return "bool";
    default: break;
  }
  return kind + std::to_string(d.bits);
}

std::vector<size_t> shape_of(const AnyArray& a) {
  std::vector<size_t> s;
  for (size_t i = 0; i < a.ndim(); ++i) s.push_back(a.shape(i));
  return s;
}

std::vector<size_t> leading_shape(const AnyArray& a) {
  std::vector<size_t> s;
  for (size_t i = 0; i + 1 < a.ndim(); ++i) s.push_back(a.shape(i));
  return s;
}

std::string index_str(const AnyArray& a, size_t flat) {
  std::vector<size_t> idx(a.ndim());
  for (size_t i = a.ndim(); i-- > 0;) {
    idx[i] = flat % a.shape(i);
    flat /= a.shape(i);
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

void check_shape(const char* name, const AnyArray& a, std::initializer_list<int64_t> want,
                 const char* dims) {
  bool ok = a.ndim() == want.size();
  size_t i = 0;
  for (int64_t w : want) {
    if (ok && w >= 0 && static_cast<int64_t>(a.shape(i)) != w) ok = false;
    ++i;
  }
  if (ok) return;
  std::string expect = "[";
  i = 0;
  for (int64_t w : want) expect += (i++ ? ", " : "") + (w >= 0 ? std::to_string(w) : "any");
  expect += "]";
  throw InputError(
      msg(name, ": shape ", shape_str(a), " where ", dims, " = ", expect, " is required"));
}

namespace {

bool code_is(const AnyArray& a, nb::dlpack::dtype_code c, int bits) {
  return a.dtype().code == static_cast<uint8_t>(c) && a.dtype().bits == bits &&
         a.dtype().lanes == 1;
}

bool c_contiguous(const AnyArray& a) {
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

/*! Calls f(flat, element) for every element of a (C order), element read as Src. */
template <typename Src, typename F>
void for_each(const AnyArray& a, F&& f) {
  const auto* base = static_cast<const Src*>(a.data());
  const size_t n = a.size(), nd = a.ndim();
  if (c_contiguous(a)) {
    for (size_t i = 0; i < n; ++i) f(i, base[i]);
    return;
  }
  std::vector<size_t> idx(nd, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < nd; ++d) off += static_cast<int64_t>(idx[d]) * a.stride(d);
    f(i, base[off]);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
}

template <typename F>
void for_each_int(const AnyArray& a, const char* name, F&& f) {
  const auto code = static_cast<nb::dlpack::dtype_code>(a.dtype().code);
  const int bits = a.dtype().bits;
  const bool sgn = code == nb::dlpack::dtype_code::Int;
  if (code == nb::dlpack::dtype_code::Bool) {
    for_each<bool>(a, [&](size_t i, bool v) { f(i, v ? int64_t{1} : int64_t{0}); });
  } else if (sgn || code == nb::dlpack::dtype_code::UInt) {
    switch (bits) {
      case 8:
        if (sgn)
          for_each<int8_t>(a, [&](size_t i, int8_t v) { f(i, int64_t{v}); });
        else
          for_each<uint8_t>(a, [&](size_t i, uint8_t v) { f(i, int64_t{v}); });
        return;
      case 16:
        if (sgn)
          for_each<int16_t>(a, [&](size_t i, int16_t v) { f(i, int64_t{v}); });
        else
          for_each<uint16_t>(a, [&](size_t i, uint16_t v) { f(i, int64_t{v}); });
        return;
      case 32:
        if (sgn)
          for_each<int32_t>(a, [&](size_t i, int32_t v) { f(i, int64_t{v}); });
        else
          for_each<uint32_t>(a, [&](size_t i, uint32_t v) { f(i, int64_t{v}); });
        return;
      case 64:
        if (sgn) {
          for_each<int64_t>(a, [&](size_t i, int64_t v) { f(i, v); });
          return;
        }
        break;
      default: break;
    }
    throw InputError(msg(name, ": dtype ", dtype_str(a),
                         " is not supported; an integer array "
                         "(int8 ... int64) is required"));
  } else {
    throw InputError(msg(name, ": dtype ", dtype_str(a), " where an integer array is required"));
  }
}

}  // namespace

bool is_f32(const AnyArray& a) { return code_is(a, nb::dlpack::dtype_code::Float, 32); }
bool is_f64(const AnyArray& a) { return code_is(a, nb::dlpack::dtype_code::Float, 64); }
bool is_float(const AnyArray& a) { return is_f32(a) || is_f64(a); }

Floats bf16_input(const char* name, const AnyArray& a) {
  Floats r;
  r.size = a.size();
  auto bad = [&](size_t i, double v, const char* why) {
    throw InputError(
        msg(name, ": element ", index_str(a, i), " = ", v, " (", dtype_str(a), ") ", why));
  };
  const char* not_bf16 =
      "is not BF16-exact: float32 holding BF16 values is required (round with "
      "macattn.round_bf16)";
  if (is_f32(a)) {
    for_each<float>(a, [&](size_t i, float v) {
      if (!std::isfinite(v)) bad(i, v, "is not finite");
      if (!mac::ref::is_bf16_exact(v)) bad(i, v, not_bf16);
    });
    if (c_contiguous(a)) {
      r.data = static_cast<const float*>(a.data());
      return r;
    }
    r.copy.resize(r.size);
    for_each<float>(a, [&](size_t i, float v) { r.copy[i] = v; });
  } else if (is_f64(a)) {
    r.copy.resize(r.size);
    for_each<double>(a, [&](size_t i, double v) {
      if (!std::isfinite(v)) bad(i, v, "is not finite");
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v || !mac::ref::is_bf16_exact(f)) bad(i, v, not_bf16);
      r.copy[i] = f;
    });
  } else {
    throw InputError(msg(name, ": dtype ", dtype_str(a),
                         " where float32 holding BF16-exact values is required"));
  }
  r.data = r.copy.data();
  return r;
}

Floats f32_input(const char* name, const AnyArray& a, bool allow_nonfinite) {
  if (!is_f32(a))
    throw InputError(msg(name, ": dtype ", dtype_str(a), " where float32 is required"));
  Floats r;
  r.size = a.size();
  if (!allow_nonfinite)
    for_each<float>(a, [&](size_t i, float v) {
      if (!std::isfinite(v))
        throw InputError(msg(name, ": element ", index_str(a, i), " = ", v, " is not finite"));
    });
  if (c_contiguous(a)) {
    r.data = static_cast<const float*>(a.data());
    return r;
  }
  r.copy.resize(r.size);
  for_each<float>(a, [&](size_t i, float v) { r.copy[i] = v; });
  r.data = r.copy.data();
  return r;
}

template <typename T>
std::vector<T> float_input(const char* name, const AnyArray& a, bool allow_nan) {
  const bool want32 = std::is_same_v<T, float>;
  if (want32 ? !is_f32(a) : !is_f64(a))
    throw InputError(msg(name, ": dtype ", dtype_str(a), " where ", want32 ? "float32" : "float64",
                         " is required (the precision of the other arguments)"));
  std::vector<T> v(a.size());
  for_each<T>(a, [&](size_t i, T x) {
    if (std::isnan(x) && !allow_nan)
      throw InputError(msg(name, ": element ", index_str(a, i), " is NaN"));
    v[i] = x;
  });
  return v;
}
template std::vector<float> float_input<float>(const char*, const AnyArray&, bool);
template std::vector<double> float_input<double>(const char*, const AnyArray&, bool);

std::vector<int64_t> int_input(const char* name, const AnyArray& a) {
  std::vector<int64_t> v(a.size());
  for_each_int(a, name, [&](size_t i, int64_t x) { v[i] = x; });
  return v;
}

std::vector<uint8_t> bool_input(const char* name, const AnyArray& a) {
  std::vector<uint8_t> v(a.size());
  for_each_int(a, name, [&](size_t i, int64_t x) { v[i] = x != 0; });
  return v;
}

}  // namespace macattn
