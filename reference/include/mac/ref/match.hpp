#pragma once
/*! \file match.hpp
 *  \brief K1 "match": the canonical FP32 squared distance of docs/semantics.md §3.1 and the
 *         nearest-candidate search with the tie rule and argmin-then-validity.
 */
#include "mac/ref/common.hpp"

#include <cstdint>

namespace mac::ref {

/*! \brief Canonical FP32 squared L2 distance `d2 = Σ_i (a_i − b_i)²` (docs/semantics.md §3.1):
 *  `D/8` lanes, lane l accumulates dims 8l … 8l+7 in order with
 *  `acc = fmaf(diff, diff, acc)` from 0, `diff = a − b` in FP32; lanes then combine by an
 *  xor butterfly with offsets D/16, …, 2, 1 (`acc_l += acc_{l xor off}`); lane 0 is the
 *  result. Bit-identical to the CUDA kernel. D must be a multiple of 16 (64/128/256). */
float canonical_d2(const float* a, const float* b, int64_t head_dim);

/*! \brief The same distance in FP64 (exact products of BF16 values, FP64 sums). */
double d2_fp64(const float* a, const float* b, int64_t head_dim);

/*! \brief Result of matching one head against its candidates. */
struct MatchResult {
  bool has_candidate = false;    //!< some position in [max(0, m−M), m) was searchable
  int64_t best_pos = -1;         //!< argmin (d2, p) over candidates; −1 if none
  float d2 = 0;                  //!< canonical FP32 distance of best (NaN if none)
  double d2_fp64 = 0;            //!< FP64 distance of best (NaN if none)
  float threshold = 0;           //!< thr = 2·D·(1−τ)² in FP32
  double margin = 0;             //!< thr − d2_fp64 (> 0 means inside the threshold)
  bool below_threshold = false;  //!< d2 < thr (strict, FP32): a hit if the entry is usable
};

}  // namespace mac::ref
