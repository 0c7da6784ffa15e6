#include "mac/tools/json.hpp"

#include <cmath>
#include <cstdio>

namespace mac::tools {

std::string json_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          r += buf;
        } else {
          r += c;
        }
    }
  }
  return r;
}

void JsonWriter::separator() {
  if (!first_.back()) out_ += ",";
  first_.back() = false;
  out_ += "\n" + std::string(static_cast<size_t>(2 * depth_), ' ');
}

void JsonWriter::key(const char* k) {
  separator();
  if (k) out_ += "\"" + json_escape(k) + "\": ";
}

JsonWriter& JsonWriter::begin_object(const char* k) {
  if (depth_ > 0 || !out_.empty()) key(k);
  out_ += "{";
  first_.push_back(true);
  ++depth_;
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  --depth_;
  first_.pop_back();
  out_ += "\n" + std::string(static_cast<size_t>(2 * depth_), ' ') + "}";
  if (depth_ == 0) out_ += "\n";
  return *this;
}
JsonWriter& JsonWriter::begin_array(const char* k) {
  key(k);
  out_ += "[";
  first_.push_back(true);
  ++depth_;
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  --depth_;
  first_.pop_back();
  out_ += "]";
  return *this;
}
static std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
JsonWriter& JsonWriter::value(const char* k, double v) {
  key(k);
  out_ += num(v);
  return *this;
}
JsonWriter& JsonWriter::value(const char* k, int64_t v) {
  key(k);
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(const char* k, bool v) {
  key(k);
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::value(const char* k, const std::string& v) {
  key(k);
  out_ += "\"" + json_escape(v) + "\"";
  return *this;
}
JsonWriter& JsonWriter::array(const char* k, const std::vector<double>& v) {
  key(k);
  out_ += "[";
  for (size_t i = 0; i < v.size(); ++i) out_ += (i ? ", " : "") + num(v[i]);
  out_ += "]";
  return *this;
}

JsonWriter& JsonWriter::array(const char* k, const std::vector<int64_t>& v) {
  key(k);
  out_ += "[";
  for (size_t i = 0; i < v.size(); ++i) out_ += (i ? ", " : "") + std::to_string(v[i]);
  out_ += "]";
  return *this;
}
JsonWriter& JsonWriter::array(const char* k, const std::vector<std::string>& v) {
  key(k);
  out_ += "[";
  for (size_t i = 0; i < v.size(); ++i) out_ += (i ? ", \"" : "\"") + json_escape(v[i]) + "\"";
  out_ += "]";
  return *this;
}

}  // namespace mac::tools
