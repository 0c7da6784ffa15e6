// Run dump ("mac-run" v1): round trip, resize, shape checks, no partial output.
#include <boost/test/unit_test.hpp>

#include "io_fixture.hpp"
#include "mac/io/h5.hpp"
#include "mac/io/run_dump.hpp"
#include "mac/io/trace_io.hpp"

#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace mac;
using namespace mac::ref;
using namespace mac::io;
using mac::test::expect_input_error;
using mac::test::ScratchDir;

namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

RunDump sample_dump(int64_t S = 5, int64_t hq = 4, int64_t d = 64) {
  RunDump r;
  r.config.params.tau = 0.45;
  r.config.params.ring = 512;
  r.config.params.tail = 256;
  r.config.params.sinks = 4;
  r.config.params.gen_min = 0;
  r.config.variant = Variant::kDowndate;
  r.config.precision = Precision::kFp64;
  r.config.prefill_mode = PrefillMode::kDowndate;
  r.config.storage = StateStorage::kFull;
  r.config.prefill = 100;
  r.layer = 1;
  r.trace_source = "synthetic v1 seed=7";
  r.resize(S, hq, d);
  std::mt19937_64 rng(12345);  // fixed seed
  std::normal_distribution<double> n01;
  for (int64_t s = 0; s < S; ++s) r.position[s] = 100 + s;
  for (size_t i = 0; i < r.hit.size(); ++i) {
    r.hit[i] = static_cast<int8_t>(rng() & 1);
    r.match_pos[i] = r.hit[i] ? static_cast<int64_t>(rng() % 100) : -1;
    r.d2[i] = i == 3 ? std::numeric_limits<double>::quiet_NaN() : std::abs(n01(rng)) * 100;
    r.lse[i] = n01(rng);
    r.exact_lse[i] = r.lse[i] + 1e-9;
    r.kv_tokens_read[i] = static_cast<int64_t>(rng() % 1000);
  }
  for (size_t i = 0; i < r.out.size(); ++i) {
    r.out[i] = n01(rng);
    r.exact_out[i] = r.out[i] * (1 + 1e-12);
  }
  return r;
}

/*! The MacParams fields a dump holds only where they differ from their defaults. */
std::vector<int64_t> optional_fields(const MacParams& p) {
  return {p.depth_cap,   p.refresh,      p.gate_window,     p.gate_probe,
          p.gate_margin, p.gate_min_hit, p.gate_fixed_bytes};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_dump)

BOOST_AUTO_TEST_CASE(resize_fills_markers) {
  RunDump r;
  r.resize(3, 2, 64);
  BOOST_TEST(r.steps == 3);
  BOOST_TEST(r.position.size() == 3u);
  BOOST_TEST(r.out.size() == 3u * 2 * 64);
  BOOST_TEST(r.match_pos[5] == -1);
  BOOST_TEST(r.hit[0] == 0);
  BOOST_TEST(std::isnan(r.d2[1]));
  BOOST_TEST(std::isnan(r.exact_out[7]));
  BOOST_TEST(r.kv_tokens_read[2] == 0);
  expect_input_error([&] { r.resize(-1, 2, 64); }, {"S = -1"});
}

BOOST_AUTO_TEST_CASE(round_trip_is_bit_exact) {
  ScratchDir dir;
  const RunDump a = sample_dump();
  const std::string p = dir.path("run.h5");
  write_run_dump(p, a);
  const RunDump b = read_run_dump(p);
  BOOST_TEST(b.config.params.tau == a.config.params.tau);
  BOOST_TEST(b.config.params.ring == a.config.params.ring);
  BOOST_TEST(b.config.params.tail == a.config.params.tail);
  BOOST_TEST(b.config.params.sinks == a.config.params.sinks);
  BOOST_TEST(b.config.params.gen_min == a.config.params.gen_min);
  BOOST_TEST(to_string(b.config.variant) == to_string(a.config.variant));
  BOOST_TEST(to_string(b.config.precision) == to_string(a.config.precision));
  BOOST_TEST(to_string(b.config.prefill_mode) == to_string(a.config.prefill_mode));
  BOOST_TEST(to_string(b.config.storage) == to_string(a.config.storage));
  BOOST_TEST(b.config.prefill == a.config.prefill);
  BOOST_TEST(b.layer == a.layer);
  BOOST_TEST(b.trace_source == a.trace_source);
  BOOST_TEST(b.steps == 5);
  BOOST_TEST(b.num_q_heads == 4);
  BOOST_TEST(b.head_dim == 64);
  BOOST_TEST(same_bits(a.position, b.position));
  BOOST_TEST(same_bits(a.hit, b.hit));
  BOOST_TEST(same_bits(a.match_pos, b.match_pos));
  BOOST_TEST(same_bits(a.d2, b.d2));  // NaN bits included
  BOOST_TEST(same_bits(a.out, b.out));
  BOOST_TEST(same_bits(a.lse, b.lse));
  BOOST_TEST(same_bits(a.exact_out, b.exact_out));
  BOOST_TEST(same_bits(a.exact_lse, b.exact_lse));
  BOOST_TEST(same_bits(a.kv_tokens_read, b.kv_tokens_read));
  BOOST_TEST(dir.listing().size() == 1u);
}

BOOST_AUTO_TEST_CASE(zero_steps_round_trip) {
  ScratchDir dir;
  const RunDump a = sample_dump(0, 4, 64);
  write_run_dump(dir.path("empty.h5"), a);
  const RunDump b = read_run_dump(dir.path("empty.h5"));
  BOOST_TEST(b.steps == 0);
  BOOST_TEST(b.num_q_heads == 4);
  BOOST_TEST(b.head_dim == 64);
}

BOOST_AUTO_TEST_CASE(datasets_and_dtypes_follow_design) {
  ScratchDir dir;
  const std::string p = dir.path("run.h5");
  write_run_dump(p, sample_dump());
  hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  BOOST_REQUIRE(f >= 0);
  struct Want {
    const char* name;
    H5T_class_t cls;
    size_t size;
    int rank;
  };
  const Want want[] = {{"position", H5T_INTEGER, 8, 1},
                       {"hit", H5T_INTEGER, 1, 2},
                       {"match_pos", H5T_INTEGER, 8, 2},
                       {"d2", H5T_FLOAT, 8, 2},
                       {"out", H5T_FLOAT, 8, 3},
                       {"lse", H5T_FLOAT, 8, 2},
                       {"exact_out", H5T_FLOAT, 8, 3},
                       {"exact_lse", H5T_FLOAT, 8, 2},
                       {"kv_tokens_read", H5T_INTEGER, 8, 2}};
  for (const Want& w : want) {
    hid_t ds = H5Dopen2(f, w.name, H5P_DEFAULT);
    BOOST_REQUIRE_MESSAGE(ds >= 0, w.name);
    hid_t t = H5Dget_type(ds);
    hid_t s = H5Dget_space(ds);
    BOOST_TEST((H5Tget_class(t) == w.cls), w.name);
    BOOST_TEST(H5Tget_size(t) == w.size, w.name);
    BOOST_TEST(H5Sget_simple_extent_ndims(s) == w.rank, w.name);
    H5Sclose(s);
    H5Tclose(t);
    H5Dclose(ds);
  }
  for (const char* a : {"schema", "version", "tau", "ring", "tail", "sinks", "gen_min", "variant",
                        "precision", "prefill", "layer", "prefill_mode", "storage", "trace_source"})
    BOOST_TEST(H5Aexists(f, a) > 0, a);
  H5Fclose(f);
}

BOOST_AUTO_TEST_CASE(writer_rejects_inconsistent_arrays_and_writes_nothing) {
  ScratchDir dir;
  RunDump a = sample_dump();
  a.lse.pop_back();
  expect_input_error([&] { write_run_dump(dir.path("r.h5"), a); }, {"r.h5", "lse", "needs 20"});
  a = sample_dump();
  a.out.push_back(0);
  expect_input_error([&] { write_run_dump(dir.path("r.h5"), a); }, {"out"});
  expect_input_error([&] { write_run_dump(dir.path("x/r.h5"), sample_dump()); },
                     {"directory", "does not exist"});
  BOOST_TEST(dir.listing().empty());
}

BOOST_AUTO_TEST_CASE(reader_rejects_wrong_schema_version_and_missing_data) {
  ScratchDir dir;
  const std::string t = dir.path("trace.h5");
  write_trace(t, mac::test::small_trace());
  expect_input_error([&] { read_run_dump(t); }, {"trace.h5", "schema = 'mac-trace'", "mac-run"});

  const std::string p = dir.path("run.h5");
  write_run_dump(p, sample_dump());
  {
    hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "exact_lse", H5P_DEFAULT);
    H5Fclose(f);
  }
  expect_input_error([&] { read_run_dump(p); }, {"run.h5", "/exact_lse", "missing"});

  const std::string q = dir.path("run2.h5");
  write_run_dump(q, sample_dump());
  {
    hid_t f = H5Fopen(q.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "version");
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "version", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    const int64_t v = 7;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(s);
    H5Fclose(f);
  }
  expect_input_error([&] { read_run_dump(q); }, {"run2.h5", "version = 7"});
  expect_input_error([&] { read_run_dump(dir.path("none.h5")); }, {"none.h5", "no such file"});
}

// The policies (semantics §3.3) and the gate (§3.5) are attributes written only where they
// differ from their defaults: a run with them echoes every value, a run without them writes
// none of them.
BOOST_AUTO_TEST_CASE(policy_and_gate_parameters_round_trip) {
  ScratchDir dir;
  RunDump a = sample_dump();
  MacParams& p = a.config.params;
  p.depth_cap = 3;
  p.refresh = 16;
  p.gate_window = 16;
  p.gate_probe = 300;
  p.gate_margin = 1200;
  p.gate_min_hit = 250;
  p.gate_fixed_bytes = 1'031'250;
  const std::string with = dir.path("gated.h5");
  write_run_dump(with, a);
  BOOST_TEST(optional_fields(read_run_dump(with).config.params) ==
                 std::vector<int64_t>({3, 16, 16, 300, 1200, 250, 1'031'250}),
             boost::test_tools::per_element());

  // The gate off but its other fields set: each one that differs from its default is kept,
  // the window (at its default 0) is not written.
  RunDump c = sample_dump();
  c.config.params.gate_probe = 7;
  c.config.params.gate_fixed_bytes = 0;
  const std::string probe_only = dir.path("probe.h5");
  write_run_dump(probe_only, c);
  BOOST_TEST(
      optional_fields(read_run_dump(probe_only).config.params) == optional_fields(c.config.params),
      boost::test_tools::per_element());

  const std::string plain = dir.path("plain.h5");
  write_run_dump(plain, sample_dump());
  const char* optional[] = {"depth_cap",   "refresh",      "gate_window",     "gate_probe",
                            "gate_margin", "gate_min_hit", "gate_fixed_bytes"};
  for (const auto& [path, want] :
       {std::pair{with, 7}, std::pair{plain, 0}, std::pair{probe_only, 2}}) {
    h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    BOOST_TEST_REQUIRE(f.valid());
    int n = 0;
    for (const char* attr : optional) n += H5Aexists(f.get(), attr) > 0;
    BOOST_TEST(n == want, path);
  }
}

// A dump without the optional attributes (written before they existed) reads as the run
// without policies and gate: the committed golden dump (data/README.md) and a fresh one with
// them deleted.
BOOST_AUTO_TEST_CASE(a_dump_without_policy_or_gate_attributes_reads_with_their_defaults) {
  const auto is_default = [](const MacParams& p) {
    return optional_fields(p) == optional_fields(MacParams{});
  };
  const std::string golden = std::string(MAC_SOURCE_DIR) + "/data/golden/synth_small_run.h5";
  {
    h5::Handle f(H5Fopen(golden.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    BOOST_TEST_REQUIRE(f.valid());
    BOOST_TEST_REQUIRE(H5Aexists(f.get(), "gate_window") == 0);  // as it was committed
  }
  const RunDump g = read_run_dump(golden);
  BOOST_TEST(is_default(g.config.params));
  BOOST_TEST(g.steps == 128);

  ScratchDir dir;
  RunDump a = sample_dump();
  a.config.params.depth_cap = 2;
  a.config.params.gate_window = 8;
  a.config.params.gate_min_hit = 100;
  const std::string p = dir.path("run.h5");
  write_run_dump(p, a);
  BOOST_TEST(!is_default(read_run_dump(p).config.params));
  {
    h5::Handle f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    BOOST_TEST_REQUIRE(f.valid());
    for (const char* attr : {"depth_cap", "gate_window", "gate_min_hit"})
      BOOST_TEST_REQUIRE(H5Adelete(f.get(), attr) >= 0, attr);
  }
  const RunDump b = read_run_dump(p);
  BOOST_TEST(is_default(b.config.params));
  BOOST_TEST(b.config.params.tau == a.config.params.tau);
  BOOST_TEST(same_bits(a.out, b.out));
}

// An optional attribute of the wrong type is refused naming it, not read as its default.
BOOST_AUTO_TEST_CASE(a_mistyped_gate_attribute_is_named) {
  ScratchDir dir;
  RunDump a = sample_dump();
  a.config.params.gate_window = 8;
  const std::string p = dir.path("run.h5");
  write_run_dump(p, a);
  {
    h5::Handle f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    BOOST_TEST_REQUIRE(f.valid());
    H5Adelete(f.get(), "gate_window");
    h5::write_attr(f.get(), "gate_window", std::string("sixteen"), h5::Str::kVariableUtf8);
  }
  expect_input_error([&] { read_run_dump(p); }, {"gate_window"});
}

BOOST_AUTO_TEST_SUITE_END()

// The configuration's enums are stored as their names; a name no parser knows is an error
// naming the file, the attribute and the value, not a silently defaulted field.
BOOST_AUTO_TEST_CASE(reader_rejects_unknown_configuration_names) {
  ScratchDir dir;
  for (const char* attr : {"variant", "precision", "prefill_mode", "storage"}) {
    const std::string p = dir.path(std::string(attr) + ".h5");
    write_run_dump(p, sample_dump());
    {
      h5::Handle f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      BOOST_TEST_REQUIRE(f.valid());
      H5Adelete(f.get(), attr);
      h5::write_attr(f.get(), attr, std::string("bogus"), h5::Str::kVariableUtf8);
    }
    expect_input_error([&] { read_run_dump(p); }, {p, attr, "'bogus'"});
  }
}
