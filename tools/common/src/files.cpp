#include "mac/tools/files.hpp"

#include "mac/ref/common.hpp"

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace mac::tools {

void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  require(!path.empty(), "output path is empty");
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  require(fs::is_directory(dir), "output directory '", dir.string(), "' of '", path,
          "' does not exist");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(msg("cannot rename '", tmp, "' to '", path, "'"));
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    require(static_cast<bool>(f), "cannot open '", tmp, "' for writing");
    f << text;
    f.close();
    require(!f.fail(), "failed writing '", tmp, "'");
  });
}

}  // namespace mac::tools
