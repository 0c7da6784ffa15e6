#pragma once
// Element strides of the step's per-head tensors (q_post/q_pre, out, lse), of prefill's queries
// and of the paged KV cache, resolved from the API's "0 = packed" convention and checked, in
// plain C++ so the CPU test suite checks them.
#include <algorithm>
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

/*! \brief One dimension of a strided tensor: its name in messages, its stride in elements
 *  and its extent. */
struct StridedDim {
  const char* name;
  int64_t stride, count;
};

/*! \brief "row 1000, head 128": the dimensions' names and strides, for messages. */
inline std::string dims_text(const StridedDim* dims, int n) {
  std::ostringstream m;
  for (int i = 0; i < n; ++i) m << (i ? ", " : "") << dims[i].name << " " << dims[i].stride;
  return m.str();
}

/*! \brief Empty if vectors of `inner` contiguous elements at strides `dims` (the caller's
 *  values, 0 meaning packed, in `given`; resolved in `dims`) are valid, else a message naming
 *  the tensor and the offending values: strides are ≥ 0, multiples of `multiple` elements and,
 *  where `distinct` (outputs, and queries, whose 16-byte loads assume one vector each), no two
 *  vectors overlap. The overlap check accepts nested layouts, the ones in use, in any order:
 *  taken by increasing stride, each stride covers everything along the ones below it (the
 *  smallest covers a vector); dimensions of extent 1 have no stride to check. */
inline std::string check_dims(const char* tensor, const StridedDim* given, const StridedDim* dims,
                              int n, int inner, int multiple, bool distinct) {
  std::ostringstream m;
  for (int i = 0; i < n; ++i)
    if (given[i].stride < 0) {
      m << tensor << " strides (" << dims_text(given, n) << ") must be ≥ 0 (0: packed)";
      return m.str();
    }
  for (int i = 0; i < n; ++i)
    if (dims[i].stride % multiple) {
      m << tensor << " strides (" << dims_text(dims, n) << ") must be multiples of " << multiple
        << " elements";
      return m.str();
    }
  if (!distinct) return {};
  StridedDim sorted[4];
  int k = 0;
  for (int i = 0; i < n && k < 4; ++i)
    if (dims[i].count > 1) sorted[k++] = dims[i];
  std::sort(sorted, sorted + k,
            [](const StridedDim& a, const StridedDim& b) { return a.stride < b.stride; });
  int64_t covered = inner;  // elements one step of the next stride must clear
  for (int i = 0; i < k; ++i) {
    if (sorted[i].stride < covered) {
      m << tensor << " strides (" << dims_text(dims, n) << ") overlap for ";
      for (int j = 0; j < n; ++j) m << dims[j].count << " " << dims[j].name << "s × ";
      m << inner
        << " elements (taken by increasing stride, each must be ≥ the vector, then ≥ the "
           "stride below it × its count)";
      return m.str();
    }
    covered = sorted[i].count * sorted[i].stride;
  }
  return {};
}

/*! \brief Empty if `rows` × `heads` vectors of `inner` elements at the given (caller's)
 *  strides are valid, else a message naming the tensor and the offending value (check_dims). */
inline std::string check_strides(const char* name, int64_t row_stride, int64_t head_stride,
                                 int rows, int heads, int inner, int multiple, bool distinct) {
  const StridedDim given[] = {{"row", row_stride, rows}, {"head", head_stride, heads}};
  if (row_stride < 0 || head_stride < 0)
    return check_dims(name, given, given, 2, inner, multiple, distinct);
  const HeadStrides s = resolve_strides(row_stride, head_stride, heads, inner);
  const StridedDim dims[] = {{"row", s.row, rows}, {"head", s.head, heads}};
  return check_dims(name, given, dims, 2, inner, multiple, distinct);
}

/*! \brief A prefill query tensor's strides [requests, positions, heads, D] with 0 meaning
 *  packed (head D, position heads·head, request positions·position). */
struct PrefillQStrides {
  int64_t request = 0, position = 0, head = 0;
};
inline PrefillQStrides resolve_prefill_q(int64_t request, int64_t position, int64_t head,
                                         int positions, int heads, int D) {
  PrefillQStrides s;
  s.head = head ? head : D;
  s.position = position ? position : int64_t{heads} * s.head;
  s.request = request ? request : int64_t{positions} * s.position;
  return s;
}

/*! \brief check_dims of a prefill query tensor (PrefillParams): `requests` × `positions` ×
 *  `heads` vectors of D elements, strides multiples of 8 and nested without overlap. */
inline std::string check_prefill_q(int64_t request, int64_t position, int64_t head, int requests,
                                   int positions, int heads, int D) {
  const StridedDim given[] = {
      {"request", request, requests}, {"position", position, positions}, {"head", head, heads}};
  if (request < 0 || position < 0 || head < 0) return check_dims("q", given, given, 3, D, 8, true);
  const PrefillQStrides s = resolve_prefill_q(request, position, head, positions, heads, D);
  const StridedDim dims[] = {{"request", s.request, requests},
                             {"position", s.position, positions},
                             {"head", s.head, heads}};
  return check_dims("q", given, dims, 3, D, 8, true);
}

/*! \brief Empty if the paged KV cache of `p` (DecodeParams or PrefillParams, whose fields
 *  have the same names) is usable: both pools and the page table given, page_size, num_pages
 *  and max_pages_per_row ≥ 1, strides (0: packed) multiples of 8 elements (16-byte copies);
 *  else a message naming the field and its value. */
template <class P>
std::string check_paged_kv(const P& p, int num_kv_heads, int D) {
  std::ostringstream m;
  if (!p.k_cache || !p.v_cache) return "k_cache/v_cache is null";
  if (!p.page_table) return "page_table is null";
  if (p.page_size < 1)
    m << "page_size = " << p.page_size << " must be ≥ 1";
  else if (p.num_pages < 1)
    m << "num_pages = " << p.num_pages << " must be ≥ 1";
  else if (p.max_pages_per_row < 1)
    m << "max_pages_per_row = " << p.max_pages_per_row << " must be ≥ 1";
  if (!m.str().empty()) return m.str();
  const int64_t ts = p.kv_token_stride ? p.kv_token_stride : int64_t{num_kv_heads} * D;
  const int64_t hs = p.kv_head_stride ? p.kv_head_stride : D;
  const int64_t ps = p.kv_page_stride ? p.kv_page_stride : ts * p.page_size;
  if (ts % 8 || hs % 8 || ps % 8)
    m << "KV strides (page " << ps << ", token " << ts << ", head " << hs
      << ") must be multiples of 8 elements (16 B)";
  return m.str();
}

}  // namespace mac::cuda::detail
