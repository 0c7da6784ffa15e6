#pragma once
/*! \file h5_builder.hpp
 *  \brief Turns a fuzzer's input into an HDF5 file through a line language, so that the
 *         mutations reach our readers' logic (attributes, shapes, dtypes, values) instead
 *         of breaking the HDF5 format itself (HDF5's own parser is not ours to fix).
 *
 *  One item per line; lines that do not parse are skipped:
 *    A <name> i <int64>        integer attribute on /
 *    A <name> f <double>       float64 attribute (nan, inf, 1e300 allowed)
 *    A <name> s <text>         variable-length UTF-8 string attribute (rest of the line)
 *    G <path>                  group
 *    D <path> <type> <d0>x<d1>... [v ...]   dataset of type f32, f64, i8, i32, i64 or u8,
 *                              rank 0-4; the values are repeated to fill it (none: zeros).
 *                              Datasets of more than 2^16 elements are chunked and never
 *                              written: a few bytes on disk for any declared shape.
 *    S <path> <text>           one more element (rest of the line) of the 1-D variable-length
 *                              string dataset <path>, written after the other lines.
 */
#include "mac/ref/common.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

namespace mac::fuzz {

/*! \brief For LLVMFuzzerInitialize: a small file may declare any shape, so what one input
 *  can make the readers allocate is kept to 2^24 elements (mac::set_max_elements). */
void limit_allocations();

/*! \brief With MAC_FUZZ_VERBOSE set (replaying one input), prints why the file was refused. */
void refused(const InputError& e);

/*! \brief Writes the file described by `data` to `path`; false if HDF5 refused to create it. */
bool build_h5(const std::string& path, const uint8_t* data, size_t size);

/*! \brief A per-process scratch file name under $TMPDIR (or /tmp) for one target. */
std::string scratch_path(const std::string& target);

/*! \brief The body of an HDF5 target: writes the file `data` describes to a scratch name of
 *  `target`, runs each of `readers` on its path (an InputError is a refusal, and the next
 *  reader still runs; anything else propagates: a finding), then removes the file. The
 *  library also defines LLVMFuzzerInitialize, which calls limit_allocations. */
void run_readers(const std::string& target, const uint8_t* data, size_t size,
                 std::initializer_list<std::function<void(const std::string&)>> readers);

}  // namespace mac::fuzz
