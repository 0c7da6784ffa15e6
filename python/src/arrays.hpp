#pragma once
/*! \file arrays.hpp
 *  \brief numpy arrays at the boundary of macattn._core: checked inputs (shape, dtype,
 *         finiteness, BF16-exactness, one message naming the argument and the first bad
 *         element) and new or borrowed outputs.
 *
 *  Inputs arrive as `AnyArray` (any dtype, any strides, read-only) so that a wrong dtype is
 *  reported by this code, naming the argument, instead of being converted silently (a
 *  float64 array cast to float32 would round) or refused with nanobind's generic message.
 */
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "mac/ref/common.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace macattn {

namespace nb = nanobind;
using namespace nb::literals;

/*! \brief Any CPU array, read-only view (numpy, or anything with the buffer/DLPack protocol). */
using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

/*! \brief A numpy array of N dimensions whose elements are T. */
template <typename T, size_t N>
using NpArray = nb::ndarray<nb::numpy, T, nb::ndim<N>>;

/*! \brief "[2, 4, 64]". */
std::string shape_str(const AnyArray& a);
/*! \brief Name of a's dtype, e.g. "float64", "int32". */
std::string dtype_str(const AnyArray& a);
/*! \brief "[i, j, k]": the C-order multi-index of flat element `flat` of an array of shape a. */
std::string index_str(const AnyArray& a, size_t flat);

/*! \brief Checks a's number of dimensions and sizes; `want[i] < 0` accepts any size.
 *  `dims` names the dimensions for the message, e.g. "[T, Hq, D]". */
void check_shape(const char* name, const AnyArray& a, std::initializer_list<int64_t> want,
                 const char* dims);

/*! \brief True iff a is float32 or float64. */
bool is_float(const AnyArray& a);
bool is_f32(const AnyArray& a);
bool is_f64(const AnyArray& a);

/*! \brief Float32 values of a checked float array, C order: a pointer into a itself when it is
 *  float32 and C-contiguous (zero-copy), else into `copy`. */
struct Floats {
  const float* data = nullptr;
  size_t size = 0;
  std::vector<float> copy;
};

/*! \brief a's values as float32, each finite and BF16-exact (docs/semantics.md §4: inputs are
 * BF16). float64 input is accepted when every value is a BF16 value (the conversion is then exact).
 *  Throws InputError naming `name`, the first offending element's index and its value. */
Floats bf16_input(const char* name, const AnyArray& a);

/*! \brief a's values as float32 (float32 input only; no BF16 requirement), finite unless
 *  `allow_nonfinite`. */
Floats f32_input(const char* name, const AnyArray& a, bool allow_nonfinite = false);

/*! \brief a's values converted to T (float32 or float64 input of the same type as T; −inf
 *  allowed, NaN refused unless allow_nan). */
template <typename T>
std::vector<T> float_input(const char* name, const AnyArray& a, bool allow_nan = false);

/*! \brief a's values as int64 (any integer dtype). */
std::vector<int64_t> int_input(const char* name, const AnyArray& a);
/*! \brief a's values as bool (bool or integer dtype: nonzero is true). */
std::vector<uint8_t> bool_input(const char* name, const AnyArray& a);

/*! \brief A new numpy array owning a zero-initialised heap buffer (as a Python object: the
 *  arrays made here are exported as they are, never copied or tied to another owner). */
template <typename T, size_t N>
nb::object new_array(const std::array<size_t, N>& shape, T** data = nullptr) {
  size_t n = 1;
  for (size_t s : shape) n *= s;
  T* p = new T[n > 0 ? n : 1]();
  nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<T*>(q); });
  if (data) *data = p;
  return nb::cast(NpArray<T, N>(p, N, shape.data(), owner), nb::rv_policy::automatic);
}

/*! \brief A numpy array of any number of dimensions whose elements are T. */
template <typename T>
using NpArrayN = nb::ndarray<nb::numpy, T>;

/*! \brief A new zero-initialised numpy array of any shape (an empty shape: 0-d). */
template <typename T>
nb::object new_array_nd(const std::vector<size_t>& shape, T** data) {
  size_t n = 1;
  for (size_t s : shape) n *= s;
  T* p = new T[n > 0 ? n : 1]();
  nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<T*>(q); });
  *data = p;
  return nb::cast(NpArrayN<T>(p, shape.size(), shape.data(), owner), nb::rv_policy::automatic);
}

/*! \brief The shape of a. */
std::vector<size_t> shape_of(const AnyArray& a);
/*! \brief The shape of a without its last dimension. */
std::vector<size_t> leading_shape(const AnyArray& a);

/*! \brief A numpy view of memory that `owner` keeps alive (read-only when T is const). */
template <typename T, size_t N>
nb::object view(T* data, const std::array<size_t, N>& shape, nb::handle owner) {
  return nb::cast(NpArray<T, N>(data, N, shape.data(), owner), nb::rv_policy::automatic);
}

}  // namespace macattn
