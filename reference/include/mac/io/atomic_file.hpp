#pragma once
/*! \file atomic_file.hpp
 *  \brief The one whole-or-nothing output writer of the tree: write to a temporary name in
 *         the destination's directory, rename onto the destination only when complete.
 *
 *  The temporary name is `<path>.tmp.<pid>`, so it lies in the destination's directory
 *  (a rename within one file system is atomic) and two processes never share it. On any
 *  failure the temporary file is removed and the exception names `path`.
 */
#include <hdf5.h>

#include <functional>
#include <string>

namespace mac::io {

/*! \brief Calls `write(tmp_path)`, which must leave a complete, closed file there, then
 *  renames tmp_path onto `path`. On an exception from `write` or a failed rename the
 *  temporary file is removed and an InputError naming `path` is thrown (or the exception
 *  of `write`, rethrown). The directory of `path` must exist and `path` must not be a
 *  directory (InputError naming it otherwise). */
void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write);

/*! \brief Creates an HDF5 file under a temporary name, calls `write(file)` on its root, then
 *  flushes and closes it, checking both return codes, and only then renames it onto
 *  `path` (write_atomically). Objects `write` opens must be closed when it returns. */
void write_h5_atomically(const std::string& path, const std::function<void(hid_t)>& write);

/*! \brief Writes `text` to `path` atomically. */
void write_text_file(const std::string& path, const std::string& text);

}  // namespace mac::io
