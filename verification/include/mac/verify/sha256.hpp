#pragma once
/*! \file sha256.hpp
 *  \brief SHA-256 (FIPS 180-4), for the identity of what a certificate certifies: the plugin's
 *         shared object, or the output files graded by the file protocol.
 */
#include <cstddef>
#include <cstdint>
#include <string>

namespace mac::verify {

/*! \brief Incremental SHA-256. */
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  /*! \brief The digest as 64 lowercase hex digits (the object is spent afterwards). */
  std::string hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

/*! \brief SHA-256 of a file's bytes (InputError if it cannot be read). */
std::string sha256_file(const std::string& path);
/*! \brief SHA-256 of a string. */
std::string sha256_text(const std::string& text);

}  // namespace mac::verify
