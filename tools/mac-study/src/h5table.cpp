#include "h5table.hpp"

#include "mac/io/schema.hpp"
#include "mac/ref/common.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace mac::study {

Cell fmt(double v) {
  Cell c("");
  if (std::isnan(v)) {
    c.text = "nan";
  } else if (std::isinf(v)) {
    c.text = v > 0 ? "inf" : "-inf";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    c.text = buf;
  }
  c.value = v;
  c.number = true;
  return c;
}

Cell fmt(int64_t v) {
  Cell c(std::to_string(v));
  c.value = static_cast<double>(v);
  c.number = true;
  return c;
}

std::string Table::csv() const {
  std::ostringstream os;
  for (size_t c = 0; c < columns.size(); ++c) os << (c ? "," : "") << columns[c];
  os << "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string& t = r[c].text;
      const bool quote = t.find_first_of(",\"") != std::string::npos;
      if (c) os << ",";
      if (quote) {
        os << '"';
        for (char ch : t) os << (ch == '"' ? "\"\"" : std::string(1, ch));
        os << '"';
      } else {
        os << t;
      }
    }
    os << "\n";
  }
  return os.str();
}

void Table::write_group(hid_t file, const std::string& group) const {
  const h5::Handle g = h5::create_group(file, group);
  h5::write_attr(g.get(), io::schema::study::kRows, static_cast<int64_t>(rows.size()));
  std::string cols;
  for (size_t c = 0; c < columns.size(); ++c) cols += (c ? "," : "") + columns[c];
  h5::write_attr(g.get(), io::schema::study::kColumns, cols);
  for (size_t c = 0; c < columns.size(); ++c) {
    std::vector<double> num(rows.size());
    bool all_num = true;
    for (size_t i = 0; i < rows.size() && all_num; ++i) {
      all_num = rows[i][c].number;
      num[i] = rows[i][c].value;
    }
    if (all_num) {
      h5::write(g.get(), columns[c], num, kLayout);
    } else {
      std::vector<std::string> s(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) s[i] = rows[i][c].text;
      h5::write_strings(g.get(), columns[c], s, h5::Str::kFixed);
    }
  }
}

}  // namespace mac::study
