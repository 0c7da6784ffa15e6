#pragma once
/*! \file trace_io.hpp
 *  \brief HDF5 reader/writer for the trace file (schema "mac-trace", version 1).
 *         The schema is documented in docs/file-formats.md.
 *
 *  Writers go through write_h5_atomically (mac/io/atomic_file.hpp): never a half file.
 *  The attribute and dataset names are mac/io/schema.hpp.
 *  Readers reject unknown schema/version, shape mismatches, NaN/Inf and values that
 *  are not BF16-exact with one InputError naming the file and dataset.
 */
#include "mac/ref/trace.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mac::io {

using ref::LayerData;
using ref::Trace;
using ref::TraceMeta;

/*! \brief Writes a whole trace. `compress` enables gzip (level 4) chunked datasets.
 *  `extra_attrs` are written as extra string root attributes (e.g. provenance). */
void write_trace(const std::string& path, const Trace& trace, bool compress = true,
                 const std::map<std::string, std::string>& extra_attrs = {});

/*! \brief Reads only the root attributes (validated). */
TraceMeta read_trace_meta(const std::string& path);

/*! \brief Reads the trace; `layers` selects layers (empty = all), in the given order,
 *  and the returned `meta.num_layers` is the number of layers returned. `max_tokens` > 0
 *  keeps only the first max_tokens positions (only those are read and validated).
 *  Validates everything: one InputError naming the file and the attribute or dataset. */
Trace read_trace(const std::string& path, const std::vector<int64_t>& layers = {},
                 int64_t max_tokens = 0);

/*! \brief Reads one layer (validated). */
LayerData read_trace_layer(const std::string& path, int64_t layer, int64_t max_tokens = 0);

}  // namespace mac::io
