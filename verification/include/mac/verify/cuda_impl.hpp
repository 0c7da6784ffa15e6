#pragma once
/*! \file cuda_impl.hpp
 *  \brief The CUDA kernels (mac::cuda::Engine) as an implementation under test: paged KV
 *         (pages of all requests shuffled in one pool, NaN poison where nothing was
 *         written), per-request ring slots, readiness through `ready` = 0 and through an
 *         epoch mismatch (alternating), GPU prefill entries, and either one mac_step per
 *         step or one captured graph replayed for every step of the chain. After each step
 *         it reads the outputs, the diagnostics (hit, matched position, keys read), the ring
 *         slot m mod M of every request, and runs full attention on a second engine to check
 *         that ineligible heads are bit-identical to it.
 *  Packs and runs each case through the GPU case runner (mac/cuda/runner.hpp) on the host
 *  API (no CUDA types); without CUDA it reports every case unsupported.
 */
#include "mac/verify/impl.hpp"

#include <memory>

namespace mac::verify {

/*! \brief CUDA implementation on device ordinal `device`. */
std::unique_ptr<Implementation> make_cuda_impl(int device);

/*! \brief True iff the CUDA library was built and a device is present. */
bool cuda_available();

}  // namespace mac::verify
