/*! \file atomic_file.cpp
 *  \brief The whole-or-nothing output writer (mac/io/atomic_file.hpp).
 */
#include "mac/io/atomic_file.hpp"

#include "mac/io/h5.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace mac::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kTmpTag = ".tmp.";

/*! This host's name with every character outside [A-Za-z0-9-] replaced by '_': the
 *  temporary name's host field then holds no '.', so `<path>.tmp.<host>.<pid>` parses from
 *  the right. */
const std::string& host_tag() {
  static const std::string tag = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') std::strcpy(buf, "localhost");
    std::string s(buf);
    for (char& c : s)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
        c = '_';
    return s;
  }();
  return tag;
}

// --- temporaries being written, for the signal handler --------------------------------
// Fixed storage, so the handler (which may only call async-signal-safe functions) reads
// static memory: a slot is free (0), being filled (1) or live (2). Paths longer than the
// buffer are not registered (a later run removes them as stale).
constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;
std::atomic<int> g_state[kSlots];
char g_paths[kSlots][kPathMax];

int register_temporary(const std::string& tmp) {
  if (tmp.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expect = 0;
    if (g_state[i].compare_exchange_strong(expect, 1)) {
      std::memcpy(g_paths[i], tmp.c_str(), tmp.size() + 1);
      g_state[i].store(2);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_state[slot].store(0);
}

void remove_live_temporaries() {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load() == 2) unlink(g_paths[i]);
}

extern "C" void remove_temporaries_at_exit() { remove_live_temporaries(); }

extern "C" void remove_temporaries_and_die(int sig) {
  remove_live_temporaries();
  // SA_RESETHAND restored the default action and SA_NODEFER leaves the signal unblocked:
  // the process now dies of it, so its parent sees 128 + sig as usual.
  raise(sig);
}

/*! The pid of a temporary of `base` (a file name) on this host, or -1 when `name` is not one. */
long temporary_pid(const std::string& name, const std::string& base) {
  const std::string prefix = base + kTmpTag + host_tag() + ".";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stol(digits);
}

bool process_gone(long pid) {
  return pid > 0 && pid != static_cast<long>(getpid()) && kill(static_cast<pid_t>(pid), 0) != 0 &&
         errno == ESRCH;
}

/*! The part of a temporary name before `.tmp.<host>.<pid>` (empty if it is not one). */
std::string temporary_base(const std::string& name) {
  const std::string tag = kTmpTag + host_tag() + ".";
  const size_t at = name.rfind(tag);
  if (at == std::string::npos || at == 0) return "";
  return temporary_pid(name, name.substr(0, at)) > 0 ? name.substr(0, at) : "";
}

void check_destination(const std::string& path, const std::string& what) {
  const std::string who = what.empty() ? path : msg(what, " ", path);
  require(!path.empty(), what.empty() ? "output path" : what, " is empty");
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  require(fs::is_directory(dir, ec), who, ": cannot write: directory '", dir.string(),
          "' does not exist");
  require(!fs::is_directory(p, ec), who, ": cannot write: it is a directory");
}

}  // namespace

std::string temporary_name(const std::string& path) {
  return msg(path, kTmpTag, host_tag(), ".", static_cast<long>(getpid()));
}

Temporary::Temporary(const std::string& path) : dest_(path) {
  check_destination(path, "");
  remove_stale_temporaries(path);
  tmp_ = temporary_name(path);
  slot_ = register_temporary(tmp_);
}

Temporary::~Temporary() {
  if (!done_) std::remove(tmp_.c_str());
  unregister_temporary(slot_);
}

void Temporary::commit() {
  if (std::rename(tmp_.c_str(), dest_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    done_ = true;
    throw WriteError(msg(dest_, ": cannot rename temporary file '", tmp_, "' onto it (",
                         std::strerror(err), ")"));
  }
  done_ = true;
}

void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write) {
  Temporary t(path);
  try {
    write(t.path());
  } catch (const WriteError&) {
    throw;
  } catch (const InputError& e) {
    throw WriteError(msg(path, ": cannot write (the old file, if any, is kept): ", e.what()));
  }
  t.commit();
}

namespace {

/*! Writes `n` bytes to a new file `tmp`, checking every write and the close (where a
 *  network file system reports a deferred error). */
void write_bytes(const std::string& path, const std::string& tmp, const char* data, size_t n) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw WriteError(
        msg(path, ": cannot create temporary file '", tmp, "' (", std::strerror(errno), ")"));
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : EIO;
      ::close(fd);
      throw WriteError(msg(path, ": writing temporary file '", tmp, "' failed after ", done, " of ",
                           n, " bytes (", std::strerror(err), "); the old file, if any, is kept"));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0)
    throw WriteError(msg(path, ": closing temporary file '", tmp, "' failed (",
                         std::strerror(errno), "); the old file, if any, is kept"));
}

}  // namespace

void write_h5_atomically(const std::string& path, const std::function<void(hid_t)>& write) {
  write_atomically(path, [&](const std::string& tmp) {
    // HDF5 (1.10) cannot close a file whose writes to disk failed: its identifier stays
    // open and the library's exit handler crashes on it. So the file is built in memory
    // (the core driver, no backing store: nothing there can fail to be written) and its
    // image is written to the temporary name by write_bytes, every call checked.
    std::vector<char> image;
    {
      h5::silence();
      h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
      constexpr size_t kGrowBy = size_t{16} << 20;  // the image grows in 16 MiB steps
      require(fapl.valid() && H5Pset_fapl_core(fapl.get(), kGrowBy, 0) >= 0, path,
              ": cannot set up an in-memory HDF5 file");
      h5::Handle f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
      require(f.valid(), path, ": cannot create HDF5 file '", tmp, "'");
      write(f.get());
      require(H5Fflush(f.get(), H5F_SCOPE_GLOBAL) >= 0, path, ": cannot flush HDF5 file '", tmp,
              "'");
      const ssize_t n = H5Fget_file_image(f.get(), nullptr, 0);
      require(n > 0, path, ": cannot size the HDF5 image of '", tmp, "'");
      image.resize(static_cast<size_t>(n));
      require(H5Fget_file_image(f.get(), image.data(), image.size()) == n, path,
              ": cannot copy the HDF5 image of '", tmp, "'");
      // Closed here, return code checked: Handle's destructor cannot report.
      require(H5Fclose(f.release()) >= 0, path, ": cannot close HDF5 file '", tmp, "'");
    }
    write_bytes(path, tmp, image.data(), image.size());
  });
}

void write_text_file(const std::string& path, const std::string& text) {
  write_atomically(
      path, [&](const std::string& tmp) { write_bytes(path, tmp, text.data(), text.size()); });
}

void check_output(const std::string& path, const std::string& what) {
  check_destination(path, what);
  const std::string probe = temporary_name(path);
  // Registered before it exists, so that a signal landing while the probe exists removes it
  // (the handler's unlink of a name not yet created is harmless).
  const int slot = register_temporary(probe);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  const int err = errno;
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  unregister_temporary(slot);
  if (fd < 0 && err == EEXIST) return;  // our own temporary: its directory is writable
  require(fd >= 0, what.empty() ? path : msg(what, " ", path), ": cannot create a file in '",
          fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".", "' (",
          std::strerror(err), ")");
}

void refuse_if_same_file(const std::string& output, std::initializer_list<std::string> inputs) {
  std::error_code ec;
  for (const std::string& in : inputs) {
    if (in.empty() || output.empty()) continue;
    bool same = false;
    if (fs::exists(output, ec) && fs::exists(in, ec)) {
      same = fs::equivalent(output, in, ec);  // device and inode, links followed
    } else {
      const fs::path a = fs::weakly_canonical(output, ec), b = fs::weakly_canonical(in, ec);
      same = !ec && a == b;
    }
    require(!same, "output '", output, "' is the input '", in,
            "' (the same file): refusing to overwrite an input");
  }
}

int remove_stale_temporaries(const std::string& path) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string base = p.filename().string();
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (process_gone(temporary_pid(name, base)) && fs::remove(it->path(), ec)) ++removed;
  }
  return removed;
}

int remove_stale_temporaries_in(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string base = temporary_base(name);
    if (!base.empty() && process_gone(temporary_pid(name, base)) && fs::remove(it->path(), ec))
      ++removed;
  }
  return removed;
}

void install_signal_cleanup() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = remove_temporaries_and_die;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
  // std::exit() from inside a write (a fatal error path) skips the destructors.
  std::atexit(remove_temporaries_at_exit);
}

}  // namespace mac::io
