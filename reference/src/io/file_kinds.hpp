#pragma once
/*! \file file_kinds.hpp
 *  \brief What the trace and the run-dump files share (private to mac_io): scalar root
 *         attributes as h5py writes them, the schema/version check, compressed datasets,
 *         typed dataset opening and parsed string attributes. Every failure is one
 *         mac::InputError whose message starts with the file name.
 */
#include "mac/io/h5.hpp"
#include "mac/io/schema.hpp"
#include "mac/ref/common.hpp"

#include <string>
#include <vector>

namespace mac::io::detail {

/*! \brief Scalar root attributes of both file kinds: strings are variable-length UTF-8, as
 *  h5py writes them (the reader also accepts fixed-length strings). */
inline void write_attr(hid_t loc, const std::string& name, const std::string& v) {
  h5::write_attr(loc, name, v, h5::Str::kVariableUtf8);
}
inline void write_attr(hid_t loc, const std::string& name, const char* v) {
  write_attr(loc, name, std::string(v));
}
inline void write_attr(hid_t loc, const std::string& name, int64_t v) {
  h5::write_attr(loc, name, v);
}
inline void write_attr(hid_t loc, const std::string& name, double v) {
  h5::write_attr(loc, name, v);
}

/*! \brief Checks the schema/version pair shared by both file kinds. */
inline void check_schema(hid_t root, const std::string& file, const char* schema, int64_t version) {
  const std::string s = h5::attr_string(root, schema::kSchema);
  require(s == schema, file, ": attribute schema = '", s, "' is not '", schema, "'");
  const int64_t v = h5::attr_int64(root, schema::kVersion);
  require(v == version, file, ": attribute version = ", v, " is not supported (this reader knows ",
          schema, " version ", version, ")");
}

/*! \brief Writes `v` with shape `dims`: with gzip > 0 in chunks of whole rows (all heads,
 *  all dims of some positions) of about 256 KiB, shuffle + gzip at that level; contiguous
 *  otherwise. (sizeof(T) is the stored element size.) */
template <typename T>
void write_dataset(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<T>& v, int gzip) {
  h5::Layout layout;  // contiguous
  if (gzip > 0) layout = {(256 * 1024) / sizeof(T), 1, static_cast<unsigned>(gzip)};
  h5::write(loc, name, dims, v, layout);
}

/*! \brief Opens dataset `name` (absolute path), checking its rank and type class (and
 *  byte size, if nonzero). */
inline h5::Dataset open_dataset(hid_t f, const std::string& file, const std::string& name, int rank,
                                H5T_class_t cls, size_t size, const char* kind) {
  h5::Dataset ds = h5::open_dataset(f, name);
  require(ds.type_class == cls && (size == 0 || ds.type_size == size), file, ": ", name,
          " must be ", kind);
  const int r = static_cast<int>(ds.dims.size());
  require(r == rank, file, ": ", name, " has rank ", r, ", expected ", rank);
  return ds;
}

/*! \brief Reads string attribute `name` and parses it, the parser's message prefixed with
 *  the file and the attribute. */
template <typename Parse>
auto parse_attr(hid_t loc, const std::string& file, const char* name, Parse parse) {
  const std::string v = h5::attr_string(loc, name);
  try {
    return parse(v);
  } catch (const InputError& e) {
    throw InputError(msg(file, ": attribute ", name, ": ", e.what()));
  }
}

}  // namespace mac::io::detail
