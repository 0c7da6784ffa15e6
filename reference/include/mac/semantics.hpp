#pragma once
/*! \file semantics.hpp
 *  \brief The vocabulary of docs/semantics.md §3 defined once, for the reference, the oracle and
 * the CUDA kernels alike: the range ends E(p) and Fe(e), the key ranges of one decode step, the hit
 * threshold, the LSE base conversion and the supported shapes.
 *
 *  No Eigen and no CUDA types: every function is `constexpr` and callable from host and
 *  device code (MAC_HD), templated on the index type so the kernels keep 32-bit indices.
 */
#include <cstdint>

#if defined(__CUDACC__)
#define MAC_HD __host__ __device__
#else
#define MAC_HD
#endif

namespace mac {

/*! \brief Makes a parameter non-deduced, so `prefix_end(p, 16)` takes its type from p. */
template <typename T>
struct NonDeduced {
  using type = T;
};
template <typename T>
using NonDeducedT = typename NonDeduced<T>::type;

/*! \brief `E(p) = max(0, p + 1 − r)`: end (exclusive) of the cached prefix of position p. */
template <typename I>
MAC_HD constexpr I prefix_end(I p, NonDeducedT<I> r) {
  return p + 1 - r > 0 ? p + 1 - r : I(0);
}

/*! \brief `Fe(e) = min(F, e)`: where a cached prefix ending at e starts (the sinks' end). */
template <typename I>
MAC_HD constexpr I sink_end(NonDeducedT<I> F, I e) {
  return F < e ? F : e;
}

/*! \brief The key ranges one decode step at position m attends (docs/semantics.md §3, steps 3 and
 * 5): sinks `[0, sink_end)`, band `[band_begin, band_end)`, tail `[tail_begin, m]`.
 *
 *  On a hit at p the band is `[E(p), E(m))` (m − p keys when both are past r) and the
 *  prefix `[Fe(E(p)), E(p))` comes from the ring; on a miss the band is `[Fe(E(m)), E(m))`
 *  and there is no prefix. `keys_read = band + sinks + tail`.
 */
template <typename I>
struct StepRanges {
  I sink_end;    //!< Fe(E(m))
  I band_begin;  //!< E(p) on a hit, Fe(E(m)) on a miss
  I band_end;    //!< E(m)
  I tail_begin;  //!< E(m)
  I kv_len;      //!< m + 1: the tail is [tail_begin, kv_len)

  MAC_HD constexpr I keys_read() const {
    return (band_end - band_begin) + sink_end + (kv_len - tail_begin);
  }
};

/*! \brief The ranges of a step at m; `hit_pos` is the matched position p, or −1 on a miss. */
template <typename I>
MAC_HD constexpr StepRanges<I> step_ranges(I m, NonDeducedT<I> hit_pos, NonDeducedT<I> r,
                                           NonDeducedT<I> F) {
  const I em = prefix_end(m, r);
  const I fem = sink_end(F, em);
  return {fem, hit_pos >= 0 ? prefix_end(hit_pos, r) : fem, em, em, m + 1};
}

/*! \brief Copies the ranges and keys_read into a result that names them as StepRanges does
 *  (the reference stepper's and the oracle's per-head results). */
template <typename Result, typename I>
MAC_HD constexpr void store_ranges(Result& res, const StepRanges<I>& k) {
  res.sink_end = k.sink_end;
  res.band_begin = k.band_begin;
  res.band_end = k.band_end;
  res.tail_begin = k.tail_begin;
  res.keys_read = k.keys_read();
}

/*! \brief Periodic refresh (docs/semantics.md §3.3): with period `N > 0`, query head `h` of
 *         `Hq` is forced to miss at every position m with `(m + ⌊h·N/Hq⌋) mod N = 0`. The
 *         offsets `⌊h·N/Hq⌋` spread the heads evenly over the period, so that about Hq/N heads
 *         refresh at each step instead of all of them at once. N = 0: never.
 */
template <typename I>
MAC_HD constexpr bool refresh_due(I m, NonDeducedT<I> h, NonDeducedT<I> num_heads,
                                  NonDeducedT<I> N) {
  return N > 0 && (m + h * N / num_heads) % N == 0;
}

/*! \brief Chain-depth cap (docs/semantics.md §3.3): a would-be hit on an entry of chain depth
 *         `depth` misses iff `K ≥ 0` and `depth ≥ K` (K = 0: every step misses; K = −1: no cap).
 */
template <typename I>
MAC_HD constexpr bool depth_capped(I depth, NonDeducedT<I> K) {
  return K >= 0 && depth >= K;
}

/*! \brief The hit threshold `thr = 2·D·(1 − τ)²` as the FP32 value every implementation
 *         compares the canonical d2 against (computed in FP64, rounded once; hit iff d2 < thr).
 */
MAC_HD constexpr float match_threshold(int64_t head_dim, double tau) {
  return static_cast<float>(2.0 * static_cast<double>(head_dim) * (1.0 - tau) * (1.0 - tau));
}

/*! \brief ln 2 and log2(e), to the precision of the widest type they are used in. */
inline constexpr double kLn2 = 0.693147180559945309417232121458176568;
inline constexpr double kLog2e = 1.442695040888963407359924681001892137;

/*! \brief Natural-log LSE from a base-2 one: the one named conversion (docs/semantics.md §4). LSE
 * is natural at every boundary; base 2 lives only inside kernels. */
template <typename T>
MAC_HD constexpr T lse_from_log2(T lse2) {
  return lse2 * static_cast<T>(kLn2);
}
/*! \brief Base-2 LSE from a natural-log one. */
template <typename T>
MAC_HD constexpr T lse_to_log2(T lse) {
  return lse * static_cast<T>(kLog2e);
}

/*! \brief A list of ints given once, as an array and as a membership test usable in device
 *  code (a host array cannot be read there). */
template <int... V>
struct IntList {
  static constexpr int values[] = {V...};
  MAC_HD static constexpr bool contains(int64_t x) { return ((x == V) || ...); }
};
/*! \brief Supported head dimensions (docs/semantics.md §4). */
using HeadDimList = IntList<64, 128, 256>;
inline constexpr const auto& kHeadDims = HeadDimList::values;
MAC_HD constexpr bool supported_head_dim(int64_t d) { return HeadDimList::contains(d); }

/*! \brief Largest GQA group `G = Hq / Hkv` the CUDA kernels support (they hold one group's
 *         plans in registers). */
inline constexpr int kMaxGroup = 16;

}  // namespace mac
