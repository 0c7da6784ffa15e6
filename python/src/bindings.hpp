#pragma once
/*! \file bindings.hpp
 *  \brief The parts of the module macattn._core, one function per source file, and what
 *         they share: the layer type and the state-to-numpy conversions.
 */
#include "arrays.hpp"

#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

#include <vector>

namespace macattn {

void bind_algebra(nb::module_& m);  //!< ⊕, ⊖, canonical d2, BF16 rounding, RoPE
void bind_io(nb::module_& m);       //!< TraceMeta, Layer, MacParams, StepperConfig, mac_io files
void bind_stepper(nb::module_& m);  //!< Stepper (trace and incremental modes) and its Step
void bind_oracle(nb::module_& m);   //!< the FP64 oracle
void bind_cuda(nb::module_& m);     //!< the CUDA host API (Engine, DecodeParams)

/*! \brief (o [n, D], lse [n]) numpy arrays of T from n states picked by `get(i)`. */
template <typename T, typename Get>
nb::tuple states_to_numpy(size_t n, size_t d, Get&& get) {
  T *po = nullptr, *pl = nullptr;
  auto o = new_array<T, 2>({n, d}, &po);
  auto l = new_array<T, 1>({n}, &pl);
  for (size_t i = 0; i < n; ++i) {
    const mac::ref::AttnState<T>& s = get(i);
    pl[i] = s.lse;
    if (static_cast<size_t>(s.o.size()) == d)
      for (size_t j = 0; j < d; ++j) po[i * d + j] = s.o[static_cast<Eigen::Index>(j)];
  }
  return nb::make_tuple(o, l);
}

/*! \brief The layer a Stepper or MacOracle reads, kept alive by `owner` (a Layer object). */
const mac::ref::LayerData& layer_of(nb::handle layer);

}  // namespace macattn
