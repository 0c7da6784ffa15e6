// tools/cli/src/cli.cpp: every program's flags, config file and exit statuses (docs/cli.md).
#define BOOST_TEST_MODULE test_cli
#include <boost/test/included/unit_test.hpp>

#include "mac/cli/cli.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/ref/common.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("mac_test_cli_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

/*! The message of the InputError `f` throws ("" if none). */
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mac::InputError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/*! An app with the kinds of options the programs have, parsed from `args`. */
struct App {
  CLI::App app{"test"};
  std::vector<double> taus{0.45};
  int64_t prefill = -1;
  int threads = 0;
  bool quiet = false;
  std::string config;
  App() {
    app.add_option("--tau", taus)->delimiter(',')->check(mac::cli::range_below(0.0, 1.0));
    app.add_option("--prefill", prefill)->check(mac::cli::range<int64_t>(1, mac::kMaxTokens));
    app.add_option("--threads", threads)->check(mac::cli::range(0, mac::kMaxThreads));
    app.add_flag("--quiet", quiet);
    app.add_option("--config", config);
  }
  std::optional<int> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "test");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return mac::cli::parse(app, static_cast<int>(argv.size()), argv.data(), "test", "--config");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(ranges_name_the_value_and_the_range) {
  auto check = [](CLI::Validator v, std::string value) { return v(value); };
  BOOST_TEST(check(mac::cli::range<int64_t>(1, 10), "10") == "");
  BOOST_TEST(check(mac::cli::range<int64_t>(1, 10), "0") ==
             "0 is outside the allowed range [1, 10]");
  BOOST_TEST(check(mac::cli::range<int64_t>(1, 10), "1e3") == "'1e3' is not an integer in [1, 10]");
  BOOST_TEST(check(mac::cli::range_below(0.0, 1.0), "1") ==
             "1 is outside the allowed range [0, 1)");
  BOOST_TEST(check(mac::cli::range_below(0.0, 1.0), "nan") ==
             "nan is outside the allowed range [0, 1)");
  BOOST_TEST(check(mac::cli::range(0.0, 1000.0), "x") == "'x' is not a number in [0, 1000]");
  BOOST_TEST(mac::cli::number(0.45) == "0.45");
  BOOST_TEST(mac::cli::number(1e12) == "1e+12");
  BOOST_TEST(mac::cli::number(1000.0) == "1000");
  BOOST_TEST(mac::cli::number(1e300) == "1e+300");
}

BOOST_AUTO_TEST_CASE(parse_errors_are_status_2_help_is_0) {
  App a;
  BOOST_TEST(!a.parse({"--tau", "0.3,0.6", "--threads", "4"}).has_value());
  BOOST_TEST(a.taus == (std::vector<double>{0.3, 0.6}));
  BOOST_TEST(*App().parse({"--tau", "-0.1"}) == mac::cli::kBadInput);
  BOOST_TEST(*App().parse({"--prefill", "-5"}) == mac::cli::kBadInput);  // not "unset"
  BOOST_TEST(*App().parse({"--threads", "100000000"}) == mac::cli::kBadInput);
  BOOST_TEST(*App().parse({"--nope"}) == mac::cli::kBadInput);
  BOOST_TEST(*App().parse({"--help"}) == mac::cli::kOk);
}

BOOST_AUTO_TEST_CASE(config_files_are_strict_and_name_the_line) {
  Scratch s;
  const auto entries = mac::cli::read_config(s.file(
      "ok.cfg", "# comment\n; comment\n\ntau = 0.3,0.6 # two\nprefill=\"300\"\r\nquiet = true\n"));
  BOOST_TEST(entries.size() == 3u);
  BOOST_TEST(entries[0].key == "tau");
  BOOST_TEST(entries[0].value == "0.3,0.6");
  BOOST_TEST(entries[0].line == 4);
  BOOST_TEST(entries[1].value == "300");
  const auto bad = [&](const std::string& text) {
    return error_of([&] { mac::cli::read_config(s.file("bad.cfg", text)); });
  };
  BOOST_TEST(has(bad("tau = 0.3\nhello world\n"), "bad.cfg:2: 'hello world' is not key = value"));
  BOOST_TEST(has(bad(std::string("ta\0u = 1\n", 9)), "bad.cfg:1: holds the control byte 0"));
  BOOST_TEST(has(bad("[study]\n"), "bad.cfg:1: sections"));
  BOOST_TEST(has(bad("tau =\n"), "bad.cfg:1: key 'tau' has no value"));
  BOOST_TEST(has(bad("tau = 1\ntau = 2\n"), "bad.cfg:2: key 'tau' is already set on line 1"));
  BOOST_TEST(has(bad("Tau = 1\n"), "key 'Tau' is not a flag name"));
  BOOST_TEST(has(bad(std::string(2 << 20, 'x')), "larger than 1048576 bytes"));
  BOOST_TEST(has(error_of([&] { mac::cli::read_config((s.dir / "none.cfg").string()); }),
                 "does not exist"));
}

BOOST_AUTO_TEST_CASE(config_values_go_through_the_flags_and_the_command_line_wins) {
  Scratch s;
  const std::string good = s.file("a.cfg", "tau = 0.2\nprefill = 300\nquiet = true\n");
  App a;
  BOOST_TEST(!a.parse({"--config", good, "--prefill", "7"}).has_value());
  BOOST_TEST(a.taus == (std::vector<double>{0.2}));
  BOOST_TEST(a.prefill == 7);
  BOOST_TEST(a.quiet);
  // A typo (tua), a value out of range, a flag that is neither true nor false: status 2.
  BOOST_TEST(*App().parse({"--config", s.file("b.cfg", "tua = 0.3\n")}) == mac::cli::kBadInput);
  BOOST_TEST(*App().parse({"--config", s.file("c.cfg", "tau = -1\n")}) == mac::cli::kBadInput);
  BOOST_TEST(*App().parse({"--config", s.file("d.cfg", "quiet = maybe\n")}) == mac::cli::kBadInput);
  App off;
  BOOST_TEST(!off.parse({"--config", s.file("e.cfg", "quiet = false\n")}).has_value());
  BOOST_TEST(!off.quiet);
}

BOOST_AUTO_TEST_CASE(exceptions_become_one_message_and_their_status) {
  using mac::cli::run;
  BOOST_TEST(run("t", [] { return 0; }) == mac::cli::kOk);
  BOOST_TEST(run("t", []() -> int { throw mac::InputError("bad"); }) == mac::cli::kBadInput);
  BOOST_TEST(run("t", []() -> int { throw mac::io::WriteError("full"); }) ==
             mac::cli::kCannotFinish);
  BOOST_TEST(run("t", []() -> int { throw std::bad_alloc(); }) == mac::cli::kCannotFinish);
  BOOST_TEST(run("t", []() -> int { throw std::logic_error("bug"); }) == mac::cli::kInternal);
}

BOOST_AUTO_TEST_SUITE_END()
