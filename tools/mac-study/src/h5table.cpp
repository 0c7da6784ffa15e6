#include "h5table.hpp"

#include "mac/ref/common.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mac::study {

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string fmt(int64_t v) { return std::to_string(v); }

namespace {
bool numeric(const std::string& s, double& out) {
  if (s == "nan") {
    out = std::nan("");
    return true;
  }
  if (s == "inf" || s == "-inf") {
    out = s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0';
}
}  // namespace

std::string Table::csv() const {
  std::ostringstream os;
  for (size_t c = 0; c < columns.size(); ++c) os << (c ? "," : "") << columns[c];
  os << "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      const bool quote = r[c].find_first_of(",\"") != std::string::npos;
      if (c) os << ",";
      if (quote) {
        os << '"';
        for (char ch : r[c]) os << (ch == '"' ? "\"\"" : std::string(1, ch));
        os << '"';
      } else {
        os << r[c];
      }
    }
    os << "\n";
  }
  return os.str();
}

void Table::write_group(hid_t file, const std::string& group) const {
  const h5::Handle g = h5::create_group(file, group);
  h5::write_attr(g.get(), "rows", static_cast<int64_t>(rows.size()));
  std::string cols;
  for (size_t c = 0; c < columns.size(); ++c) cols += (c ? "," : "") + columns[c];
  h5::write_attr(g.get(), "columns", cols);
  for (size_t c = 0; c < columns.size(); ++c) {
    std::vector<double> num(rows.size());
    bool all_num = true;
    for (size_t i = 0; i < rows.size() && all_num; ++i) all_num = numeric(rows[i][c], num[i]);
    if (all_num) {
      h5::write(g.get(), columns[c], num, kLayout);
    } else {
      std::vector<std::string> s(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) s[i] = rows[i][c];
      h5::write_strings(g.get(), columns[c], s, h5::Str::kFixed);
    }
  }
}

}  // namespace mac::study
