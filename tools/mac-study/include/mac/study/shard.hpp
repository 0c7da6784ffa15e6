#pragma once
/*! \file shard.hpp
 *  \brief Splitting a mac-study sweep into N shards for a job array (`--shard k/N`) and
 *         checking that the shards left every run (`--merge N`): docs/study-format.md,
 *         "Shards". The partition depends only on the sweep's configuration and the traces'
 *         shapes, never on which runs are already done, so every process of an array (and
 *         the merge) computes the same one.
 */
#include <cstdint>
#include <string>
#include <vector>

namespace mac::study {

/*! \brief Shard `index` of `count` (0 ≤ index < count); {0, 1} is the whole sweep. */
struct Shard {
  int64_t index = 0, count = 1;
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

/*! \brief Parses "k/N" (two decimal whole numbers, N ≥ 1, 0 ≤ k < N); InputError naming
 *  `flag`, the text and the allowed range otherwise (`1x/2`, `3/2`, `0/0` are refused). */
Shard parse_shard(const std::string& text, const std::string& flag = "--shard");

/*! \brief Parses a shard count N ≥ 1 (decimal); InputError naming `flag` and the text. */
int64_t parse_shard_count(const std::string& text, const std::string& flag = "--merge");

/*! \brief Estimated cost of one run, in head-dimension dot products: S·Hq·(M + P + (S+1)/2).
 *  Every step matches against the M ring entries and reads at most m + 1 keys (a miss),
 *  on average P + (S+1)/2 over the steps m = P … P+S−1; hits read fewer, but the hit rate
 *  is not known before the run, so the estimate is the miss-only cost. */
double run_cost(int64_t steps, int64_t heads, int64_t ring, int64_t prefill);

/*! \brief Deals items to `count` shards, balanced by cost: in order of decreasing cost
 *  (ties: lower index first) each item goes to the shard with the least cost so far (ties:
 *  lower shard). Returns the shard of every item; every item is in exactly one shard, and
 *  no shard's total exceeds the mean by more than the largest single cost. */
std::vector<int64_t> deal_by_cost(const std::vector<double>& cost, int64_t count);

}  // namespace mac::study
