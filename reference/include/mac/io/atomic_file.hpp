#pragma once
/*! \file atomic_file.hpp
 *  \brief The one whole-or-nothing output writer of the tree: write to a temporary name in
 *         the destination's directory, rename onto the destination only when complete; and
 *         the checks every program makes on its outputs before it computes anything.
 *
 *  The temporary name is `<path>.tmp.<host>.<pid>`: it lies in the destination's directory
 *  (a rename within one file system is atomic), two processes never share it, and a later
 *  run can tell a stale one (its process, on this host, no longer runs) from one being
 *  written and remove it (remove_stale_temporaries). On any failure the temporary file is
 *  removed, the destination keeps its old content and the exception names `path`; on
 *  SIGINT, SIGTERM or SIGHUP (with install_signal_cleanup) the temporaries being written
 *  are removed before the process dies of the signal. Only SIGKILL or a crash leaves one.
 */
#include "mac/ref/common.hpp"

#include <hdf5.h>

#include <functional>
#include <initializer_list>
#include <string>

namespace mac::io {

/*! \brief A write that failed (disk full, file-size limit, I/O error, failed rename): the
 *  destination keeps its old content. An InputError, so callers that only tell success
 *  from failure need nothing new; programs exit with their own status for it
 *  (docs/cli.md). */
class WriteError : public InputError {
 public:
  using InputError::InputError;
};

/*! \brief The temporary name of `path` for this process: `<path>.tmp.<host>.<pid>`. */
std::string temporary_name(const std::string& path);

/*! \brief A temporary file beside `path`, removed unless committed. While it lives its name
 *  is registered for install_signal_cleanup. The destination is checked first (check_output):
 *  its directory must exist and `path` must not be a directory. */
class Temporary {
 public:
  explicit Temporary(const std::string& path);
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary();
  const std::string& path() const { return tmp_; }  //!< the temporary name to write
  /*! \brief Renames the (complete, closed) temporary onto the destination; WriteError
   *  naming both when the rename fails (the temporary is then removed). */
  void commit();

 private:
  std::string dest_, tmp_;
  int slot_ = -1;  // registration for the signal handler
  bool done_ = false;
};

/*! \brief Calls `write(tmp_path)`, which must leave a complete, closed file there, then
 *  renames tmp_path onto `path`. On an exception from `write` or a failed rename the
 *  temporary file is removed; an InputError from `write` becomes a WriteError naming
 *  `path` (other exceptions are rethrown as they are). The directory of `path` must exist
 *  and `path` must not be a directory (InputError naming it otherwise). */
void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write);

/*! \brief Creates an HDF5 file under a temporary name, calls `write(file)` on its root, then
 *  flushes and closes it, checking both return codes, and only then renames it onto
 *  `path` (write_atomically). Objects `write` opens must be closed when it returns. A
 *  failed flush or close (e.g. past the file-size limit) leaves the old file and no
 *  temporary. */
void write_h5_atomically(const std::string& path, const std::function<void(hid_t)>& write);

/*! \brief Writes `text` to `path` atomically (write errors, flush and close checked). */
void write_text_file(const std::string& path, const std::string& text);

/*! \brief Checks, before any computation, that `path` can be written: its directory exists
 *  and a file can be created in it (a probe under the temporary name is created and
 *  removed), and `path` is not a directory. InputError naming `path` (and `what`, e.g.
 *  "--out", when not empty) otherwise. */
void check_output(const std::string& path, const std::string& what = "");

/*! \brief Refuses (InputError naming both) an output `path` that is the same file as one of
 *  `inputs`, through hard or symbolic links too: by device and inode where both exist, by
 *  canonical path otherwise. Empty inputs are skipped. Call it before anything is opened
 *  for writing. */
void refuse_if_same_file(const std::string& output, std::initializer_list<std::string> inputs);

/*! \brief Removes the temporaries of `path` (`<path>.tmp.<this host>.<pid>`) whose process
 *  no longer runs; returns how many. Temporaries of other hosts (a shared file system)
 *  and of live processes are left alone. */
int remove_stale_temporaries(const std::string& path);

/*! \brief The same for every temporary in directory `dir` (not recursive). */
int remove_stale_temporaries_in(const std::string& dir);

/*! \brief Installs handlers that, on SIGINT, SIGTERM or SIGHUP, remove every temporary
 *  being written (registered by Temporary) and then let the process die of the signal
 *  (exit status 128 + signal); and ignores SIGXFSZ, so that a write past the file-size
 *  limit (`ulimit -f`) fails with EFBIG and is reported as a WriteError instead of killing
 *  the process mid-write; and removes at exit() the temporaries still registered (an exit
 *  from inside a write skips their destructors). Idempotent. */
void install_signal_cleanup();

}  // namespace mac::io
