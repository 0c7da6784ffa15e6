#pragma once
/*! \file h5.hpp
 *  \brief The one small HDF5 (C API, 1.10) layer shared by the trace/run-dump files
 *         (mac_ref), mac-study and mac-verify: an owning handle, files and groups, scalar
 *         attributes, typed datasets and string datasets.
 *
 *  Every failure is a mac::InputError whose message starts with the HDF5 file's name and
 *  names the attribute or dataset, e.g. "run.h5: dataset '/lse' is missing". HDF5's own
 *  error-stack printing is switched off: our message is the one the user sees.
 *  Numbers are stored little-endian (H5T_STD_I8LE, H5T_STD_I64LE, H5T_IEEE_F32LE,
 *  H5T_IEEE_F64LE) whatever the host.
 */
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mac::h5 {

/*! \brief Owns one HDF5 identifier and closes it with the H5?close of its type. */
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.release()) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.release();
    }
    return *this;
  }
  ~Handle() { reset(); }
  hid_t get() const { return id_; }        //!< the identifier, or H5I_INVALID_HID
  bool valid() const { return id_ >= 0; }  //!< holds an identifier
  hid_t release() {                        //!< gives up ownership without closing
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset();  //!< closes the identifier (if any); the handle becomes invalid

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/*! \brief How strings are stored: the callers' formats differ and are kept as they are. */
enum class Str {
  kFixed,         //!< fixed-length ASCII, NUL-padded, as wide as the longest string (≥ 1)
  kVariable,      //!< variable-length ASCII
  kVariableUtf8,  //!< variable-length UTF-8, as h5py writes str
};

/*! \brief Dataset creation: contiguous, or chunked along dim 0 with shuffle + deflate. */
struct Layout {
  hsize_t chunk_elements =
      0;  //!< chunk ≈ this many elements, in whole rows of dim 0; 0 = contiguous
  hsize_t min_elements = 1;  //!< smaller datasets (and empty ones) stay contiguous
  unsigned deflate = 0;      //!< gzip level of chunked datasets
};

/*! \brief An open dataset with its name, shape and file type class / byte size. */
struct Dataset {
  Handle id;
  std::string name;
  std::vector<hsize_t> dims;
  H5T_class_t type_class = H5T_NO_CLASS;
  size_t type_size = 0;
};

void silence();                    //!< switches HDF5's stderr error printing off
std::string file_name(hid_t loc);  //!< name of the file holding `loc`
std::string shape_str(const std::vector<hsize_t>& dims);  //!< "[a, b, c]"

Handle create_file(const std::string& path);  //!< creates (truncates) a file for writing
/*! \brief Opens read-only; "no such file", "is a directory", "not an HDF5 file" otherwise. */
Handle open_file(const std::string& path);
Handle create_group(hid_t loc, const std::string& name);  //!< creates group `name`
Handle open_group(hid_t loc,
                  const std::string& name);  //!< opens group `name`; "is missing" otherwise

/*! \brief First missing prefix of the link path `name` ("" if it all exists): H5Lexists
 *  fails on a path whose intermediate group is missing, so each level is tested. */
std::string first_missing(hid_t loc, const std::string& name);
inline bool exists(hid_t loc, const std::string& name) { return first_missing(loc, name).empty(); }

void write_attr(hid_t loc, const std::string& name, const std::string& v,
                Str s = Str::kFixed);                            //!< scalar string
void write_attr(hid_t loc, const std::string& name, double v);   //!< scalar H5T_IEEE_F64LE
void write_attr(hid_t loc, const std::string& name, int64_t v);  //!< scalar H5T_STD_I64LE
bool has_attr(hid_t loc, const std::string& name);  //!< attribute `name` exists on `loc`
std::string attr_string(hid_t loc,
                        const std::string& name);  //!< scalar string, fixed or variable length
double attr_double(hid_t loc, const std::string& name);  //!< scalar float or integer
int64_t attr_int64(hid_t loc, const std::string& name);  //!< scalar integer

/*! \brief Writes `v` as a dataset of shape `dims` (row-major; their product must be v.size()). */
template <typename T>
void write(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
           const std::vector<T>& v, const Layout& layout = {});
/*! \brief Writes `v` as a 1-D dataset. */
template <typename T>
void write(hid_t loc, const std::string& name, const std::vector<T>& v, const Layout& layout = {}) {
  write(loc, name, {static_cast<hsize_t>(v.size())}, v, layout);
}
/*! \brief Writes a 1-D string dataset, contiguous. */
void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v, Str s);

/*! \brief Opens dataset `name`; "is missing" (naming the missing group) or "is not a dataset". */
Dataset open_dataset(hid_t loc, const std::string& name);
/*! \brief Reads rows [0, rows) of dim 0 of an open dataset, converted to T. */
template <typename T>
std::vector<T> read_rows(const Dataset& ds, hsize_t rows);
/*! \brief Reads a whole dataset, checking its element count equals `expect` (if ≥ 0). */
template <typename T>
std::vector<T> read(hid_t loc, const std::string& name, int64_t expect = -1);
/*! \brief Reads a whole 1-D variable-length string dataset. */
std::vector<std::string> read_strings(hid_t loc, const std::string& name);

}  // namespace mac::h5
