#pragma once
/*! \file cli.hpp
 *  \brief What every command-line program shares (docs/cli.md): the exit statuses, parsing
 *         with CLI11 into them, range validators whose message names the flag and its
 *         range, the strict `key = value` config file, and the main() wrapper that turns an
 *         exception into one message and its exit status.
 *
 *  A program's main() is
 *  \code
 *    CLI::App app{"..."};
 *    app.add_option("--threads", threads)->check(mac::cli::range(0, mac::kMaxThreads));
 *    if (auto rc = mac::cli::parse(app, argc, argv, "mac-x")) return *rc;
 *    return mac::cli::run("mac-x", [&] { ...; return mac::cli::kOk; });
 *  \endcode
 */
#include "mac/semantics.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mac::cli {

/*! \brief The exit status of every program (docs/cli.md has the table). */
enum Exit : int {
  kOk = 0,            //!< done, and (for a checking program) every check passed
  kCheckFailed = 1,   //!< the run finished and its verdict is FAIL (mac-verify)
  kBadInput = 2,      //!< bad usage or input, refused before any output is written
  kIncomplete = 3,    //!< finished without a verdict (mac-verify INCOMPLETE, mac-sim --strict)
  kCannotFinish = 4,  //!< a write failed (disk full, file-size limit) or memory ran out
  kInternal = 5,      //!< an unexpected error: a bug, please report the message
  kNoDevice = 77,     //!< a GPU program on a machine without a CUDA device (CTest: skipped)
};

/*! \brief The shortest decimal form of `v` that reads back as the same double. */
std::string number(double v);
inline std::string number(int64_t v) { return std::to_string(v); }
inline std::string number(int v) { return std::to_string(v); }
inline std::string number(uint64_t v) { return std::to_string(v); }

/*! \brief A CLI11 validator: the value must read as a T in [lo, hi], or in [lo, hi) when
 *  `open_above` (NaN never does). The message, which CLI11 prefixes with the flag, is e.g.
 *  "--steps: -1 is outside the allowed range [0, 2147483647]". Applies to each element of a
 *  list option. */
template <typename T>
CLI::Validator range(T lo, T hi, bool open_above = false) {
  const std::string bounds = "[" + number(lo) + ", " + number(hi) + (open_above ? ")" : "]");
  return CLI::Validator(
      [lo, hi, open_above, bounds](std::string& s) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(s, v))
          return "'" + s + "' is not " + (std::is_integral_v<T> ? "an integer" : "a number") +
                 " in " + bounds;
        if (!(v >= lo && (open_above ? v < hi : v <= hi)))
          return s + " is outside the allowed range " + bounds;
        return std::string();
      },
      "in " + bounds);
}

/*! \brief range(lo, hi, true): the value must lie in [lo, hi). */
template <typename T>
CLI::Validator range_below(T lo, T hi) {
  return range(lo, hi, true);
}

/*! \brief A CLI11 validator: the value is a supported head dimension (mac::kHeadDims); the
 *  message names the value and the set. */
inline CLI::Validator head_dim() {
  return CLI::IsMember(std::vector<int>(std::begin(kHeadDims), std::end(kHeadDims)));
}

/*! \brief One `key = value` line of a config file. */
struct ConfigEntry {
  std::string key, value;
  int line = 0;
};

/*! \brief Reads a config file strictly: blank lines and lines starting with `#` or `;` are
 *  skipped, every other line is `key = value` (a key of lowercase letters, digits and `-`;
 *  a value that is not empty, optionally in double quotes; ` #` starts a comment). An
 *  InputError "FILE:LINE: ..." refuses a missing or unreadable file, one over 1 MiB, a line
 *  with a control byte (a binary file), a section header, a line without `=`, a bad key, an
 *  empty value and a key given twice. */
std::vector<ConfigEntry> read_config(const std::string& path);

/*! \brief Parses the command line into `app`, after installing mac::io::install_signal_cleanup.
 *  When `config_flag` (e.g. "--config", an option of `app`) is given, its file is read with
 *  read_config and every entry becomes `--key=value` (a flag takes `true` or `false`)
 *  unless the command line gives that flag itself; an unknown key is refused with its line. Returns
 * nothing when the program should go on, else the exit status to return: kOk after --help,
 * kBadInput after a parse error, printed as one line "<prog>: error: <message>" (a value from the
 * config file is named with its line). */
std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& prog,
                         const std::string& config_flag = "");

/*! \brief Runs `body` and returns its status. An exception becomes one line on stderr,
 *  "<prog>: error: <what>", and the status of its kind: mac::InputError kBadInput,
 *  mac::io::WriteError and std::bad_alloc ("out of memory ...") kCannotFinish, anything
 *  else kInternal. */
int run(const std::string& prog, const std::function<int()>& body);

/*! \brief Inside a catch block: prints the exception being handled as run() does and returns
 *  its status, for a main() that handles some exceptions of its own first. */
int failed(const std::string& prog);

}  // namespace mac::cli
