#include "mac/study/shard.hpp"

#include "mac/ref/common.hpp"

#include <algorithm>
#include <numeric>

namespace mac::study {

namespace {
/*! Whole decimal number made of digits only (no sign, no spaces, at most 18 digits so it
 *  fits int64); false otherwise. */
bool parse_whole(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}
}  // namespace

Shard parse_shard(const std::string& text, const std::string& flag) {
  const auto slash = text.find('/');
  Shard s;
  require(slash != std::string::npos && parse_whole(text.substr(0, slash), s.index) &&
              parse_whole(text.substr(slash + 1), s.count),
          flag, " '", text, "' is not k/N (two whole numbers, 0 <= k < N)");
  require(s.count >= 1, flag, " '", text, "': N = ", s.count, " shards; N must be at least 1");
  require(s.index < s.count, flag, " '", text, "': k = ", s.index, " is outside [0, ", s.count,
          ")");
  return s;
}

int64_t parse_shard_count(const std::string& text, const std::string& flag) {
  int64_t n = 0;
  require(parse_whole(text, n) && n >= 1, flag, " '", text,
          "' is not a shard count (a whole number N >= 1)");
  return n;
}

double run_cost(int64_t steps, int64_t heads, int64_t ring, int64_t prefill) {
  const double S = static_cast<double>(steps);
  return S * static_cast<double>(heads) *
         (static_cast<double>(ring) + static_cast<double>(prefill) + (S + 1.0) / 2.0);
}

std::vector<int64_t> deal_by_cost(const std::vector<double>& cost, int64_t count) {
  require(count >= 1, "deal_by_cost: shard count ", count, " must be at least 1");
  std::vector<size_t> order(cost.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<size_t>(count), 0.0);
  std::vector<int64_t> shard(cost.size(), 0);
  for (size_t i : order) {
    const auto s = std::min_element(load.begin(), load.end()) - load.begin();
    load[static_cast<size_t>(s)] += cost[i];
    shard[i] = s;
  }
  return shard;
}

}  // namespace mac::study
