/*! \file atomic_file.cpp
 *  \brief The whole-or-nothing output writer (mac/io/atomic_file.hpp).
 */
#include "mac/io/atomic_file.hpp"

#include "mac/io/h5.hpp"
#include "mac/ref/common.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace mac::io {

void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  require(!path.empty(), "output path is empty");
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  require(fs::is_directory(dir, ec), path, ": cannot write: directory '", dir.string(),
          "' does not exist");
  require(!fs::is_directory(p, ec), path, ": cannot write: it is a directory");
  const std::string tmp = msg(path, ".tmp.", static_cast<long>(::getpid()));
  try {
    write(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(msg(path, ": cannot rename temporary file '", tmp, "' onto it"));
  }
}

void write_h5_atomically(const std::string& path, const std::function<void(hid_t)>& write) {
  write_atomically(path, [&](const std::string& tmp) {
    h5::Handle f = h5::create_file(tmp);
    write(f.get());
    require(H5Fflush(f.get(), H5F_SCOPE_GLOBAL) >= 0, path, ": cannot flush temporary file '", tmp,
            "'");
    // Closed here, return code checked, before the rename: Handle's destructor cannot report.
    require(H5Fclose(f.release()) >= 0, path, ": cannot close temporary file '", tmp, "'");
  });
}

void write_text_file(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    require(static_cast<bool>(f), path, ": cannot open temporary file '", tmp, "' for writing");
    f << text;
    f.close();
    require(!f.fail(), path, ": failed writing temporary file '", tmp, "'");
  });
}

}  // namespace mac::io
