#pragma once
/*! \file json.hpp
 *  \brief A minimal JSON writer (objects, arrays, numbers, strings) for summaries.
 *  Non-finite numbers are written as null (JSON has no NaN/Inf).
 */
#include <cstdint>
#include <string>
#include <vector>

namespace mac::tools {

class JsonWriter {
 public:
  JsonWriter& begin_object(const char* key = nullptr);
  JsonWriter& end_object();
  JsonWriter& begin_array(const char* key = nullptr);
  JsonWriter& end_array();
  JsonWriter& value(const char* key, double v);
  JsonWriter& value(const char* key, int64_t v);
  JsonWriter& value(const char* key, int v) { return value(key, static_cast<int64_t>(v)); }
  JsonWriter& value(const char* key, bool v);
  JsonWriter& value(const char* key, const std::string& v);
  JsonWriter& value(const char* key, const char* v) { return value(key, std::string(v)); }
  JsonWriter& array(const char* key, const std::vector<double>& v);
  JsonWriter& array(const char* key, const std::vector<int64_t>& v);
  JsonWriter& array(const char* key, const std::vector<std::string>& v);
  const std::string& str() const { return out_; }

 private:
  void key(const char* k);
  void separator();
  std::string out_;
  std::vector<bool> first_{true};
  int depth_ = 0;
};

std::string json_escape(const std::string& s);

}  // namespace mac::tools
