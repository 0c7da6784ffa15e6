#pragma once
/*! \file state.hpp
 *  \brief The attention-state algebra (docs/semantics.md §2): states `(o, L)` with natural-log
 *         `L`, merge ⊕ and downdate ⊖. Empty states are handled inside the type.
 *
 *  For a key set T: `L = ln Σ_{t∈T} exp(s·q·k_t)`, `o = Σ_t exp(s·q·k_t − L)·v_t`.
 *  The empty set is `(0, −inf)`.
 */
#include "mac/ref/common.hpp"

#include <Eigen/Core>

#include <cmath>
#include <limits>

namespace mac::ref {

template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/*! \brief Attention state over a key set: normalised output `o` [D] and natural-log LSE `L`. */
template <typename T>
struct AttnState {
  Vec<T> o;                                     //!< [D], normalised output
  T lse = -std::numeric_limits<T>::infinity();  //!< natural log of the softmax denominator

  /*! \brief The empty state `(0, −inf)` of dimension d. */
  static AttnState empty(Eigen::Index d) {
    return {Vec<T>::Zero(d), -std::numeric_limits<T>::infinity()};
  }
  /*! \brief Empty iff `L` is −inf or NaN (docs/semantics.md §2: such a side is ignored by ⊕). */
  bool is_empty() const { return !(lse > -std::numeric_limits<T>::infinity()); }
  Eigen::Index dim() const { return o.size(); }

  template <typename U>
  AttnState<U> cast() const {
    return {o.template cast<U>(), static_cast<U>(lse)};
  }
};

/*! \brief Merge of disjoint key sets:
 *  `μ = max(L1, L2)`, `L = μ + ln(e^{L1−μ} + e^{L2−μ})`, `o = e^{L1−L}·o1 + e^{L2−L}·o2`.
 *  An empty side yields the other side; empty ⊕ empty is empty (never NaN). */
template <typename T>
AttnState<T> merge(const AttnState<T>& a, const AttnState<T>& b) {
  if (a.is_empty()) return b.is_empty() ? AttnState<T>::empty(a.dim()) : b;
  if (b.is_empty()) return a;
  using std::exp;
  using std::log;
  const T mu = a.lse > b.lse ? a.lse : b.lse;
  const T wa = exp(a.lse - mu), wb = exp(b.lse - mu);
  const T lse = mu + log(wa + wb);
  AttnState<T> r;
  r.lse = lse;
  r.o = exp(a.lse - lse) * a.o + exp(b.lse - lse) * b.o;
  return r;
}

/*! \brief Result of a downdate: the state and its condition number `1/(1−t)`. */
template <typename T>
struct DowndateResult {
  AttnState<T> state;
  T condition = 1;       //!< `1/(1−t)`: the output loses about log10(condition) digits
  bool emptied = false;  //!< true when W held all the mass (within the tolerance)
};

/*! \brief Default cancellation tolerance of ⊖: `1 − t ≤ 4·ε(T)` means W holds all the
 *  mass (the relative rounding of `L_W − L_T` alone is a few ε). */
template <typename T>
constexpr T downdate_tolerance() {
  return 4 * std::numeric_limits<T>::epsilon();
}

/*! \brief Downdate: remove the keys W ⊂ T from a state over T.
 *  `t = e^{L_W − L_T}` (≤ 1), `L = L_T + ln(1 − t)`, `o = (o_T − t·o_W)/(1 − t)`,
 *  with `1 − t` computed as `−expm1(L_W − L_T)`. Returns empty when `1 − t ≤ tol`
 *  (W holds all the mass) and reports the condition number `1/(1 − t)`. Removing an
 *  empty W returns the total unchanged; downdating an empty total gives empty. */
template <typename T>
DowndateResult<T> downdate(const AttnState<T>& total, const AttnState<T>& w,
                           T tol = downdate_tolerance<T>()) {
  DowndateResult<T> r;
  if (w.is_empty()) {
    r.state = total;
    return r;
  }
  if (total.is_empty()) {
    r.state = AttnState<T>::empty(total.dim());
    r.emptied = true;
    return r;
  }
  using std::expm1;
  using std::log;
  const T one_minus_t = -expm1(w.lse - total.lse);
  if (!(one_minus_t > tol)) {  // also catches NaN and t > 1
    r.state = AttnState<T>::empty(total.dim());
    r.condition = std::numeric_limits<T>::infinity();
    r.emptied = true;
    return r;
  }
  using std::exp;
  const T t = exp(w.lse - total.lse);
  r.condition = 1 / one_minus_t;
  r.state.lse = total.lse + log(one_minus_t);
  r.state.o = (total.o - t * w.o) / one_minus_t;
  return r;
}

}  // namespace mac::ref
