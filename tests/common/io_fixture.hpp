#pragma once
// Shared helpers of test_io and test_reference: a scratch directory per test, small trace
// builders and checks of bits and of input errors.
#include "mac/ref/synth.hpp"
#include "mac/ref/trace.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace mac::test {

/*! A fresh scratch directory, removed with everything in it when the test ends. */
struct ScratchDir {
  std::filesystem::path dir;
  ScratchDir() {
    static int counter = 0;
    dir = std::filesystem::temp_directory_path() /
          ("mac_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  /*! Names of everything in the directory (to prove no temporary file was left). */
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    return out;
  }
};

/*! A small valid trace: 2 layers, Hq 4, Hkv 2, D 64, 40 positions (fixed seed, printed
 *  in the source attribute). */
inline ref::Trace small_trace(uint64_t seed = 7, int64_t tokens = 40) {
  ref::SynthParams p;
  p.tokens = tokens;
  p.num_layers = 2;
  p.num_q_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.seed = seed;
  return ref::generate_synthetic_trace(p);
}

/*! Bit-exact equality of two float arrays. */
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/*! Runs f, expects InputError, and checks that its message contains every fragment. */
template <typename F>
void expect_input_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE("InputError: " << what);
    for (const auto& frag : fragments)
      BOOST_TEST(what.find(frag) != std::string::npos,
                 "message '" << what << "' lacks '" << frag << "'");
    return;
  }
  BOOST_ERROR("expected InputError containing '" << (fragments.empty() ? "" : fragments[0]) << "'");
}

}  // namespace mac::test
