#pragma once
/*! \file attention.hpp
 *  \brief Exact partial attention of one query over a key range (online softmax).
 */
#include "mac/ref/state.hpp"
#include "mac/ref/trace.hpp"

#include <vector>

namespace mac::ref {

/*! \brief `attn(q, [a, b))` over KV head `hk` of `layer`: the state (o, L) with
 *  `L = ln Σ_{t∈[a,b)} exp(s·q·k_t)` and `o = Σ_t exp(s·q·k_t − L)·v_t`, accumulated in
 *  `Acc` (float or double) by the online-softmax recurrence over blocks of 128 keys in order.
 *  `q` is [D] (post-RoPE). An empty range gives the empty state.
 *  Preconditions (checked): 0 ≤ a ≤ b ≤ layer.tokens. */
template <typename Acc>
AttnState<Acc> attend(const LayerData& layer, int64_t kv_head, const float* q, double scale,
                      int64_t a, int64_t b);

extern template AttnState<float> attend<float>(const LayerData&, int64_t, const float*, double,
                                               int64_t, int64_t);
extern template AttnState<double> attend<double>(const LayerData&, int64_t, const float*, double,
                                                 int64_t, int64_t);

/*! \brief One query of attend_many: query vector `q` [D] (post-RoPE) and its key range [a, b). */
struct RangeQuery {
  const float* q = nullptr;
  int64_t a = 0, b = 0;
};

/*! \brief `attn(q_j, [a_j, b_j))` for several queries on one KV head, the same states as
 *  attend<Acc> up to rounding order: keys are visited in blocks of 128, each block's
 *  logits for all queries whose range meets it are one matrix product, so the K/V of a
 *  block are read once for all of them (GQA heads, prefill positions). */
template <typename Acc>
std::vector<AttnState<Acc>> attend_many(const LayerData& layer, int64_t kv_head, double scale,
                                        const std::vector<RangeQuery>& queries);

extern template std::vector<AttnState<float>> attend_many<float>(const LayerData&, int64_t, double,
                                                                 const std::vector<RangeQuery>&);
extern template std::vector<AttnState<double>> attend_many<double>(const LayerData&, int64_t,
                                                                   double,
                                                                   const std::vector<RangeQuery>&);

}  // namespace mac::ref
