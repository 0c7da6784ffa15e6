/*! \file cli.cpp
 *  \brief The shared command-line layer (mac/cli/cli.hpp).
 */
#include "mac/cli/cli.hpp"

#include "mac/io/atomic_file.hpp"
#include "mac/ref/common.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <set>

namespace mac::cli {
namespace {

/*! A config file larger than this is not a config file (a trace passed by mistake). */
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

/*! True when `flag` occurs in `text` as a whole flag name (not a prefix of a longer one). */
bool names_flag(const std::string& text, const std::string& flag) {
  for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    const bool whole =
        end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) ||
                                text[end] == '-' || text[end] == '_');
    if (whole) return true;
  }
  return false;
}

/*! The value of `flag` on the command line ("--flag V" or "--flag=V"), if given. */
std::optional<std::string> flag_value(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag && i + 1 < argc) return std::string(argv[i + 1]);
    if (a.compare(0, flag.size() + 1, flag + "=") == 0) return a.substr(flag.size() + 1);
  }
  return std::nullopt;
}

bool flag_given(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag || a.compare(0, flag.size() + 1, flag + "=") == 0) return true;
  }
  return false;
}

std::string known_keys(const CLI::App& app, const std::string& config_flag) {
  std::string keys;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) {
      if ("--" + n == config_flag || n == "help") continue;
      keys += (keys.empty() ? "" : ", ") + n;
    }
  }
  return keys;
}

/*! `--key=value` arguments from the config file's entries (the command line wins). */
std::vector<std::string> config_arguments(const CLI::App& app, int argc, char** argv,
                                          const std::string& config_flag, const std::string& path,
                                          std::map<std::string, int>& line_of) {
  std::vector<std::string> out;
  for (const ConfigEntry& e : read_config(path)) {
    const std::string flag = "--" + e.key;
    const CLI::Option* o =
        flag == config_flag || e.key == "help" ? nullptr : app.get_option_no_throw(flag);
    require(o != nullptr, path, ":", e.line, ": unknown key '", e.key,
            "' (the keys are the long flags without --: ", known_keys(app, config_flag), ")");
    if (flag_given(argc, argv, flag)) continue;
    line_of[flag] = e.line;
    out.push_back(flag + "=" + e.value);  // a flag takes =true or =false the same way
  }
  return out;
}

}  // namespace

std::string number(double v) { return shortest(v); }

std::vector<ConfigEntry> read_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require(fs::is_regular_file(path, ec), path, ": config file does not exist or is not a file");
  const std::uintmax_t size = fs::file_size(path, ec);
  require(!ec && size <= kMaxConfigBytes, path, ": config file is larger than ", kMaxConfigBytes,
          " bytes (not a config file?)");
  std::ifstream f(path, std::ios::binary);
  require(static_cast<bool>(f), path, ": cannot read the config file");
  std::vector<std::string> lines;
  for (std::string raw; std::getline(f, raw);) lines.push_back(raw);
  require(!f.bad(), path, ": cannot read the config file");
  // A binary file is named as one before its first line is parsed.
  for (size_t i = 0; i < lines.size(); ++i)
    for (const char c : lines[i]) {
      const auto u = static_cast<unsigned char>(c);
      require(!(u < 0x20 && c != '\t' && c != '\r') && u != 0x7f, path, ":", i + 1,
              ": holds the control byte ", static_cast<int>(u),
              " (a binary file?); a config file is key = value lines");
    }
  std::vector<ConfigEntry> out;
  std::map<std::string, int> seen;
  for (int n = 1; n <= static_cast<int>(lines.size()); ++n) {
    const std::string line = trim(lines[static_cast<size_t>(n - 1)]);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    require(line[0] != '[', path, ":", n, ": sections ('", line, "') are not supported");
    const size_t eq = line.find('=');
    require(eq != std::string::npos, path, ":", n, ": '", line, "' is not key = value");
    ConfigEntry e;
    e.line = n;
    e.key = trim(line.substr(0, eq));
    std::string value = line.substr(eq + 1);
    if (const size_t hash = value.find(" #"); hash != std::string::npos) value.resize(hash);
    value = trim(value);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    e.value = value;
    require(!e.key.empty() && e.key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") ==
                                  std::string::npos,
            path, ":", n, ": key '", e.key, "' is not a flag name (lowercase letters, digits, -)");
    require(!e.value.empty(), path, ":", n, ": key '", e.key, "' has no value");
    const auto [it, fresh] = seen.emplace(e.key, n);
    require(fresh, path, ":", n, ": key '", e.key, "' is already set on line ", it->second);
    out.push_back(e);
  }
  return out;
}

std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& prog,
                         const std::string& config_flag) {
  io::install_signal_cleanup();
  std::map<std::string, int> line_of;
  std::string config_path;
  try {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    if (!config_flag.empty()) {
      if (const auto p = flag_value(argc, argv, config_flag)) {
        config_path = *p;
        for (auto& a : config_arguments(app, argc, argv, config_flag, config_path, line_of))
          args.push_back(std::move(a));
      }
    }
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (const auto& [flag, line] : line_of)
      if (names_flag(what, flag)) what += msg(" (", config_path, ":", line, ")");
    std::fprintf(stderr, "%s: error: %s\nRun with --help for the flags and their ranges.\n",
                 prog.c_str(), what.c_str());
    return kBadInput;
  } catch (const InputError& e) {  // the config file
    std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
    return kBadInput;
  }
  return std::nullopt;
}

int failed(const std::string& prog) {
  try {
    throw;
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
    return kCannotFinish;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
    return kBadInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "%s: error: out of memory: an allocation failed (the sizes asked for need more "
                 "memory than this machine has)\n",
                 prog.c_str());
    return kCannotFinish;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", prog.c_str(), e.what());
    return kInternal;
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an exception of unknown type\n", prog.c_str());
    return kInternal;
  }
}

int run(const std::string& prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    return failed(prog);
  }
}

}  // namespace mac::cli
