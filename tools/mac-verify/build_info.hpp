#pragma once
/*! \file build_info.hpp
 *  \brief The commit mac-verify was built from, captured when it was built (build_info.cmake
 *         regenerates the definitions on every build, changing the file only when they change).
 */
namespace mac::verify::build {
extern const char* const kGitCommit;  //!< `git rev-parse --short=12 HEAD`, or "unknown"
/*! \brief "clean", "dirty" (tracked files differ from the commit) or "unknown" (no git). */
extern const char* const kGitTree;
}  // namespace mac::verify::build
