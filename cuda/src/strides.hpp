#pragma once
// Element strides of the step's per-head tensors (q_post/q_pre, out, lse), resolved from the
// API's "0 = packed" convention and checked, in plain C++ so the CPU test suite checks them.
#include <cstdint>
#include <sstream>
#include <string>

namespace mac::cuda::detail {

/*! \brief A [rows, heads, inner] tensor's strides in elements (inner elements contiguous). */
struct HeadStrides {
  int64_t row = 0, head = 0;
};

/*! \brief The strides a caller gave, with 0 meaning packed ([rows, heads, inner]: head stride
 *  `inner`, row stride heads·inner). */
inline HeadStrides resolve_strides(int64_t row, int64_t head, int heads, int inner) {
  HeadStrides s;
  s.head = head ? head : inner;
  s.row = row ? row : int64_t{heads} * s.head;
  return s;
}

/*! \brief Empty if `rows` × `heads` vectors of `inner` elements at the given (caller's) strides
 *  are valid, else a message naming the tensor and the offending value: strides are ≥ 0 (0:
 *  packed), multiples of `multiple` elements, and, where `distinct` (outputs, and queries,
 *  whose 16-byte loads assume one vector per head), no two vectors overlap. The overlap check
 *  accepts nested layouts, the ones in use: the smaller stride covers a vector and the larger
 *  one covers all vectors along the smaller (rows inside heads or heads inside rows). */
inline std::string check_strides(const char* name, int64_t row_stride, int64_t head_stride,
                                 int rows, int heads, int inner, int multiple, bool distinct) {
  std::ostringstream m;
  if (row_stride < 0 || head_stride < 0) {
    m << name << " strides (row " << row_stride << ", head " << head_stride
      << ") must be ≥ 0 (0: packed)";
    return m.str();
  }
  const HeadStrides s = resolve_strides(row_stride, head_stride, heads, inner);
  if (s.row % multiple || s.head % multiple) {
    m << name << " strides (row " << s.row << ", head " << s.head << ") must be multiples of "
      << multiple << " elements";
    return m.str();
  }
  if (!distinct) return {};
  // Dimensions of extent 1 have no stride to check.
  const int64_t n_row = rows > 1 ? rows : 1, n_head = heads > 1 ? heads : 1;
  int64_t s_in = 0, n_in = 1, s_out = 0;  // the smaller stride's, then the larger's
  if (n_row > 1 && n_head > 1) {
    const bool heads_inner = s.head <= s.row;
    s_in = heads_inner ? s.head : s.row;
    n_in = heads_inner ? n_head : n_row;
    s_out = heads_inner ? s.row : s.head;
  } else if (n_row > 1) {
    s_in = s.row;
  } else if (n_head > 1) {
    s_in = s.head;
  } else {
    return {};
  }
  if (s_in < inner || (s_out && s_out < n_in * s_in)) {
    m << name << " strides (row " << s.row << ", head " << s.head << ") overlap for " << rows
      << " rows × " << heads << " heads × " << inner
      << " elements (the smaller stride must be ≥ the vector, the larger ≥ the smaller × its "
         "count)";
    return m.str();
  }
  return {};
}

}  // namespace mac::cuda::detail
