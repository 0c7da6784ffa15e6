#include "mac/tools/progress.hpp"

#include <cstdio>

namespace mac::tools {

Progress::Progress(std::string label, int64_t total, double interval_s, bool enabled)
    : label_(std::move(label)),
      total_(total),
      interval_s_(interval_s),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  const double el = elapsed_s();
  const double left =
      done > 0 ? el * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  std::fprintf(stderr, "[%s] %lld/%lld (%.0f%%) elapsed %.0fs, about %.0fs left\n", label_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_),
               total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
               el, left);
  printed_ = true;
}

void Progress::finish() {
  if (enabled_ && printed_)
    std::fprintf(stderr, "[%s] done in %.1fs\n", label_.c_str(), elapsed_s());
}

}  // namespace mac::tools
