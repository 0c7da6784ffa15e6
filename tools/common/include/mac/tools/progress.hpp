#pragma once
/*! \file progress.hpp
 *  \brief A progress line on stderr with the estimated time left, at most every few seconds.
 */
#include <chrono>
#include <cstdint>
#include <string>

namespace mac::tools {

class Progress {
 public:
  Progress(std::string label, int64_t total, double interval_s = 5.0, bool enabled = true);
  /*! \brief Reports that `done` of `total` units are finished (prints if the interval passed). */
  void update(int64_t done);
  /*! \brief Prints the final line if anything was printed before. */
  void finish();
  double elapsed_s() const;

 private:
  std::string label_;
  int64_t total_;
  double interval_s_;
  bool enabled_, printed_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace mac::tools
