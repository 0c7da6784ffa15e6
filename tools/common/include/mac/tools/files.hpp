#pragma once
/*! \file files.hpp
 *  \brief Whole-or-nothing output files: write to a temporary name, rename when complete.
 */
#include <functional>
#include <string>

namespace mac::tools {

/*! \brief Calls `write(tmp_path)` and renames tmp_path to `path` on success; on any
 *  exception removes the temporary file and rethrows. The directory must exist
 *  (InputError naming it otherwise). */
void write_atomically(const std::string& path,
                      const std::function<void(const std::string&)>& write);

/*! \brief Writes `text` to `path` atomically. */
void write_text_file(const std::string& path, const std::string& text);

}  // namespace mac::tools
