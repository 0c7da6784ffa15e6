// libFuzzer target: mac-study's config file (mac::cli::read_config and mac::cli::parse with
// mac-study's kinds of options: lists with ranges, members, flags). The input is the file. A
// bad file must give exit status 2 (kBadInput) with a message, never a crash or another
// exception. docs/fuzzing.md.
#include "mac/cli/cli.hpp"
#include "mac/ref/common.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      "/tmp/mac-fuzz-config-" + std::to_string(static_cast<long>(getpid())) + ".cfg";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    mac::cli::read_config(path);
  } catch (const mac::InputError&) {
  }
  CLI::App app{"fuzz"};
  std::string out, config;
  std::vector<double> taus;
  std::vector<int64_t> rings;
  std::vector<std::string> variants;
  int64_t prefill = -1;
  int threads = 0;
  bool quiet = false;
  app.add_option("--out", out);
  app.add_option("--config", config);
  app.add_option("--tau", taus)->delimiter(',')->check(mac::cli::range_below(0.0, 1.0));
  app.add_option("--ring", rings)->delimiter(',')->check(mac::cli::range<int64_t>(1, 1 << 20));
  app.add_option("--variant", variants)
      ->delimiter(',')
      ->check(CLI::IsMember({"split", "downdate"}));
  app.add_option("--prefill", prefill)->check(mac::cli::range<int64_t>(1, mac::kMaxTokens));
  app.add_option("--threads", threads)->check(mac::cli::range(0, mac::kMaxThreads));
  app.add_flag("--quiet", quiet);
  const char* argv[] = {"fuzz", "--config", path.c_str()};
  const auto rc = mac::cli::parse(app, 3, const_cast<char**>(argv), "fuzz", "--config");
  if (rc && *rc != mac::cli::kBadInput && *rc != mac::cli::kOk) __builtin_trap();
  std::remove(path.c_str());
  return 0;
}
