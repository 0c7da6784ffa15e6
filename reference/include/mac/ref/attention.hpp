#pragma once
/*! \file attention.hpp
 *  \brief Exact partial attention of one query over a key range (online softmax).
 */
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

namespace mac::ref {

/*! \brief `attn(q, [a, b))` over KV head `hk` of `layer`: the state (o, L) with
 *  `L = ln Σ_{t∈[a,b)} exp(s·q·k_t)` and `o = Σ_t exp(s·q·k_t − L)·v_t`, accumulated in
 *  `Acc` (float or double) by the online-softmax recurrence over blocks of 64 keys in order.
 *  `q` is [D] (post-RoPE). An empty range gives the empty state.
 *  Preconditions (checked): 0 ≤ a ≤ b ≤ layer.tokens. */
template <typename Acc>
AttnState<Acc> attend(const LayerData& layer, int64_t kv_head, const float* q, double scale,
                      int64_t a, int64_t b);

extern template AttnState<float> attend<float>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);
extern template AttnState<double> attend<double>(const LayerData&, int64_t, const float*, double, int64_t, int64_t);

}  // namespace mac::ref
