// mac::tools::JsonWriter and json_escape (tools/common/src/json.cpp): numbers read back as the
// same double (non-finite as null), integers exactly, every string escapes to JSON that
// decodes back to it, and the layout of nested objects and arrays.
#include "mac/tools/json.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

using mac::tools::json_escape;
using mac::tools::JsonWriter;

namespace {

/*! The elements of a one-line JSON array "[a, b, c]" as text. */
std::vector<std::string> elements(const std::string& json, const std::string& key) {
  const auto open = json.find("\"" + key + "\": [");
  BOOST_TEST_REQUIRE(open != std::string::npos, json);
  const auto begin = json.find('[', open) + 1, end = json.find(']', begin);
  std::vector<std::string> out;
  for (size_t i = begin; i < end;) {
    const size_t comma = std::min(json.find(", ", i), end);
    out.push_back(json.substr(i, comma - i));
    i = comma == end ? end : comma + 2;
  }
  return out;
}

/*! Decodes the body of a JSON string (what json_escape writes): the escapes \" \\ \n \t \b
 *  \f \r \/ and \uXXXX (below 0x80 only, which is all json_escape writes). Throws on an
 *  escape JSON does not have and on a raw control character, which JSON forbids. */
std::string json_unescape(const std::string& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20) throw std::runtime_error("raw control character in a JSON string");
    if (c == '"') throw std::runtime_error("unescaped quote in a JSON string");
    if (c != '\\') {
      r += s[i];
      continue;
    }
    const char e = s.at(++i);
    switch (e) {
      case '"': r += '"'; break;
      case '\\': r += '\\'; break;
      case '/': r += '/'; break;
      case 'n': r += '\n'; break;
      case 't': r += '\t'; break;
      case 'b': r += '\b'; break;
      case 'f': r += '\f'; break;
      case 'r': r += '\r'; break;
      case 'u': {
        if (s.size() < i + 5) throw std::runtime_error("short \\u escape");
        const long v = std::strtol(s.substr(i + 1, 4).c_str(), nullptr, 16);
        if (v >= 0x80) throw std::runtime_error("\\u escape above 0x7f");
        r += static_cast<char>(v);
        i += 4;
        break;
      }
      default: throw std::runtime_error(std::string("no JSON escape \\") + e);
    }
  }
  return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

BOOST_AUTO_TEST_SUITE(json)

// %.17g: every finite double, subnormals and the extremes included, reads back bit for bit;
// JSON has no NaN or infinity, so those are null.
BOOST_AUTO_TEST_CASE(numbers_read_back_as_the_same_double_and_non_finite_is_null) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> finite = {0.1,
                                      1.0 / 3.0,
                                      -2.5e-300,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::min(),
                                      std::numeric_limits<double>::max(),
                                      -std::numeric_limits<double>::max(),
                                      123456789012345678.0,
                                      std::nextafter(1.0, 2.0),
                                      0.0,
                                      -0.0};
  std::vector<double> all = finite;
  all.insert(all.end(), {std::nan(""), inf, -inf});
  JsonWriter w;
  w.begin_object().array("a", all);
  w.value("one", 0.1).end_object();
  const auto el = elements(w.str(), "a");
  BOOST_TEST_REQUIRE(el.size() == all.size());
  for (size_t i = 0; i < finite.size(); ++i) {
    char* end = nullptr;
    const double back = std::strtod(el[i].c_str(), &end);
    BOOST_TEST(*end == '\0', el[i]);
    BOOST_TEST(same_bits(back, finite[i]), el[i] << " reads back as " << back);
  }
  for (size_t i = finite.size(); i < all.size(); ++i) BOOST_TEST(el[i] == "null");
  BOOST_TEST(w.str().find("\"one\": 0.10000000000000001") != std::string::npos, w.str());
  JsonWriter v;
  v.begin_object().value("nan", std::nan("")).value("inf", inf).end_object();
  BOOST_TEST(v.str() == "{\n  \"nan\": null,\n  \"inf\": null\n}\n");
}

BOOST_AUTO_TEST_CASE(integers_are_exact) {
  const std::vector<int64_t> v = {0, -1, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()};
  JsonWriter w;
  w.begin_object().array("i", v).value("big", int64_t{9007199254740993}).value("small", 7);
  w.end_object();
  const auto el = elements(w.str(), "i");
  BOOST_TEST_REQUIRE(el.size() == 4u);
  BOOST_TEST(el[0] == "0");
  BOOST_TEST(el[1] == "-1");
  BOOST_TEST(el[2] == "9223372036854775807");
  BOOST_TEST(el[3] == "-9223372036854775808");
  // 2^53 + 1 is not a double: an int64 is written from the integer, not through one.
  BOOST_TEST(w.str().find("\"big\": 9007199254740993,") != std::string::npos, w.str());
  BOOST_TEST(w.str().find("\"small\": 7\n") != std::string::npos, w.str());
}

// Every byte 0x01..0xff (and NUL) escapes to a JSON string body that decodes back to it:
// control characters never appear raw, quotes and backslashes are escaped, UTF-8 passes.
BOOST_AUTO_TEST_CASE(strings_escape_to_json_that_decodes_back) {
  std::string every;
  for (int c = 0; c < 256; ++c) every += static_cast<char>(c);
  for (const std::string& s : {every, std::string("τ = 0.45, \"quoted\" \\ path\\to"),
                               std::string(), std::string("tab\there\nnew line")}) {
    const std::string e = json_escape(s);
    std::string back;
    BOOST_CHECK_NO_THROW(back = json_unescape(e));
    BOOST_TEST(back == s);
  }
  BOOST_TEST(json_escape("a\"b\\c\n\t\x01\x1f") == "a\\\"b\\\\c\\n\\t\\u0001\\u001f");
  BOOST_TEST(json_escape("τ") == "τ");  // UTF-8 bytes are not escaped
}

BOOST_AUTO_TEST_CASE(keys_and_string_values_are_escaped) {
  JsonWriter w;
  w.begin_object().value("k\"ey", std::string("v\\al\n")).value("c", "x\x02");
  w.array("s", std::vector<std::string>{"a\"", "b"}).end_object();
  BOOST_TEST(w.str() ==
             "{\n  \"k\\\"ey\": \"v\\\\al\\n\",\n  \"c\": \"x\\u0002\",\n"
             "  \"s\": [\"a\\\"\", \"b\"]\n}\n");
}

// The layout mac-sim's --json summaries have (docs/walkthrough.md reads them): two spaces
// per level, one member per line, arrays of numbers on one line, a newline at the end.
BOOST_AUTO_TEST_CASE(nested_objects_and_arrays_are_laid_out_one_member_a_line) {
  JsonWriter w;
  w.begin_object();
  w.value("n", int64_t{1}).value("ok", true).value("no", false);
  w.begin_array("layers");
  w.begin_object().value("x", 0.5).array("h", std::vector<int64_t>{1, 2}).end_object();
  w.begin_object().end_object();
  w.end_array();
  w.array("e", std::vector<double>{});
  w.end_object();
  BOOST_TEST(w.str() ==
             "{\n"
             "  \"n\": 1,\n"
             "  \"ok\": true,\n"
             "  \"no\": false,\n"
             "  \"layers\": [\n"
             "    {\n"
             "      \"x\": 0.5,\n"
             "      \"h\": [1, 2]\n"
             "    },\n"
             "    {\n"
             "    }],\n"
             "  \"e\": []\n"
             "}\n");
}

BOOST_AUTO_TEST_SUITE_END()
