// Trace file ("mac-trace" v1): round trip, validation errors, and no partial output.
#define BOOST_TEST_MODULE mac_io
#include <boost/test/included/unit_test.hpp>

#include "io_fixture.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/ref/bf16.hpp"

#include <hdf5.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace mac;
using namespace mac::ref;
using namespace mac::io;
using mac::test::expect_input_error;
using mac::test::same_bits;
using mac::test::ScratchDir;
using mac::test::small_trace;

namespace {

// --- Deliberate damage to a valid file, through the HDF5 C API ----------------------

struct File {
  hid_t id;
  explicit File(const std::string& p) : id(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    BOOST_REQUIRE(id >= 0);
  }
  ~File() { H5Fclose(id); }
};

void set_string_attr(const std::string& path, const char* name, const std::string& value) {
  File f(path);
  if (H5Aexists(f.id, name) > 0) H5Adelete(f.id, name);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(f.id, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = value.c_str();
  BOOST_REQUIRE(H5Awrite(attr, type, &p) >= 0);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

void set_int_attr(const std::string& path, const char* name, int64_t value) {
  File f(path);
  if (H5Aexists(f.id, name) > 0) H5Adelete(f.id, name);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(f.id, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  BOOST_REQUIRE(H5Awrite(attr, H5T_NATIVE_INT64, &value) >= 0);
  H5Aclose(attr);
  H5Sclose(space);
}

void delete_attr(const std::string& path, const char* name) {
  File f(path);
  BOOST_REQUIRE(H5Adelete(f.id, name) >= 0);
}

void delete_link(const std::string& path, const char* name) {
  File f(path);
  BOOST_REQUIRE(H5Ldelete(f.id, name, H5P_DEFAULT) >= 0);
}

/*! Overwrites one element (row-major flat index) of a float dataset. */
void poke_float(const std::string& path, const char* dataset, hsize_t flat, float value) {
  File f(path);
  hid_t ds = H5Dopen2(f.id, dataset, H5P_DEFAULT);
  BOOST_REQUIRE(ds >= 0);
  hid_t space = H5Dget_space(ds);
  hsize_t dims[3];
  BOOST_REQUIRE(H5Sget_simple_extent_ndims(space) == 3);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  const hsize_t start[3] = {flat / (dims[1] * dims[2]), (flat / dims[2]) % dims[1], flat % dims[2]};
  const hsize_t count[3] = {1, 1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mspace = H5Screate_simple(1, count, nullptr);
  BOOST_REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mspace, space, H5P_DEFAULT, &value) >= 0);
  H5Sclose(mspace);
  H5Sclose(space);
  H5Dclose(ds);
}

/*! Replaces a dataset by a float32 one of another shape (zeros). */
void reshape_dataset(const std::string& path, const char* dataset, std::vector<hsize_t> dims) {
  File f(path);
  BOOST_REQUIRE(H5Ldelete(f.id, dataset, H5P_DEFAULT) >= 0);
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<float> zeros(n, 0.0f);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t ds =
      H5Dcreate2(f.id, dataset, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  BOOST_REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()) >= 0);
  H5Dclose(ds);
  H5Sclose(space);
}

std::string valid_file(const ScratchDir& dir, const std::string& name = "trace.h5") {
  const std::string p = dir.path(name);
  write_trace(p, small_trace(), /*compress=*/false);
  return p;
}

void check_equal(const Trace& a, const Trace& b) {
  BOOST_TEST(a.meta.head_dim == b.meta.head_dim);
  BOOST_TEST(a.meta.num_q_heads == b.meta.num_q_heads);
  BOOST_TEST(a.meta.num_kv_heads == b.meta.num_kv_heads);
  BOOST_TEST(a.meta.num_layers == b.meta.num_layers);
  BOOST_TEST(a.meta.softmax_scale == b.meta.softmax_scale);  // bit-exact FP64 attribute
  BOOST_TEST(a.meta.rope_theta == b.meta.rope_theta);
  BOOST_TEST((a.meta.rope_style == b.meta.rope_style));
  BOOST_TEST(a.meta.source == b.meta.source);
  BOOST_REQUIRE(a.layers.size() == b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    BOOST_TEST(a.layers[l].tokens == b.layers[l].tokens);
    BOOST_TEST(same_bits(a.layers[l].q_pre, b.layers[l].q_pre));
    BOOST_TEST(same_bits(a.layers[l].q_post, b.layers[l].q_post));
    BOOST_TEST(same_bits(a.layers[l].k, b.layers[l].k));
    BOOST_TEST(same_bits(a.layers[l].v, b.layers[l].v));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_file)

BOOST_AUTO_TEST_CASE(round_trip_is_bit_exact_compressed_and_not) {
  ScratchDir dir;
  const Trace t = small_trace();
  for (bool compress : {true, false}) {
    const std::string p = dir.path(compress ? "z.h5" : "raw.h5");
    write_trace(p, t, compress, {{"note", "round trip"}});
    check_equal(t, read_trace(p));
    const TraceMeta m = read_trace_meta(p);
    BOOST_TEST(m.num_layers == 2);
    BOOST_TEST(m.source == t.meta.source);
  }
  // Only the two finished files: no temporary left behind.
  BOOST_TEST(dir.listing().size() == 2u);
}

BOOST_AUTO_TEST_CASE(gptj_style_and_theta_round_trip) {
  ScratchDir dir;
  Trace t = small_trace();
  t.meta.rope_style = RopeStyle::kGptj;
  t.meta.rope_theta = 500000;
  write_trace(dir.path("g.h5"), t);
  const TraceMeta m = read_trace_meta(dir.path("g.h5"));
  BOOST_TEST((m.rope_style == RopeStyle::kGptj));
  BOOST_TEST(m.rope_theta == 500000.0);
}

BOOST_AUTO_TEST_CASE(layer_selection_and_max_tokens) {
  ScratchDir dir;
  const Trace t = small_trace();
  const std::string p = dir.path("t.h5");
  write_trace(p, t);
  const Trace sel = read_trace(p, {1, 0}, 10);
  BOOST_REQUIRE(sel.layers.size() == 2u);
  BOOST_TEST(sel.meta.num_layers == 2);
  const LayerData& a = sel.layers[0];
  const LayerData& src = t.layers[1];
  BOOST_TEST(a.tokens == 10);
  const size_t nq = 10 * 4 * 64, nk = 10 * 2 * 64;
  BOOST_TEST(same_bits(a.q_pre, std::vector<float>(src.q_pre.begin(), src.q_pre.begin() + nq)));
  BOOST_TEST(same_bits(a.k, std::vector<float>(src.k.begin(), src.k.begin() + nk)));
  const LayerData one = read_trace_layer(p, 0);
  BOOST_TEST(one.tokens == 40);
  BOOST_TEST(same_bits(one.v, t.layers[0].v));
  const Trace single = read_trace(p, {1});
  BOOST_TEST(single.meta.num_layers == 1);
  expect_input_error([&] { read_trace_layer(p, 2); }, {"t.h5", "layer 2", "out of range"});
  expect_input_error([&] { read_trace(p, {-1}); }, {"layer -1"});
  expect_input_error([&] { read_trace_layer(p, 0, -5); }, {"max_tokens"});
}

BOOST_AUTO_TEST_CASE(unknown_schema) {
  ScratchDir dir;
  const std::string p = valid_file(dir);
  set_string_attr(p, "schema", "mac-trace-x");
  expect_input_error([&] { read_trace(p); }, {"trace.h5", "schema", "mac-trace-x"});
  expect_input_error([&] { read_trace_meta(p); }, {"schema"});
}

BOOST_AUTO_TEST_CASE(unknown_version) {
  ScratchDir dir;
  const std::string p = valid_file(dir);
  set_int_attr(p, "version", 2);
  expect_input_error([&] { read_trace(p); }, {"trace.h5", "version = 2", "not supported"});
}

BOOST_AUTO_TEST_CASE(missing_attribute) {
  ScratchDir dir;
  const std::string p = valid_file(dir);
  delete_attr(p, "rope_theta");
  expect_input_error([&] { read_trace_meta(p); }, {"trace.h5", "rope_theta", "missing"});
}

BOOST_AUTO_TEST_CASE(bad_attribute_values) {
  ScratchDir dir;
  const std::string p = valid_file(dir);
  set_string_attr(p, "rope_style", "llama");
  expect_input_error([&] { read_trace_meta(p); }, {"trace.h5", "rope_style", "llama"});
  const std::string q = valid_file(dir, "t2.h5");
  set_int_attr(q, "head_dim", 96);
  expect_input_error([&] { read_trace_meta(q); }, {"t2.h5", "head_dim = 96"});
  const std::string r = valid_file(dir, "t3.h5");
  set_string_attr(r, "num_layers", "two");
  expect_input_error([&] { read_trace_meta(r); }, {"t3.h5", "num_layers", "integer"});
}

BOOST_AUTO_TEST_CASE(shape_mismatch_vs_root_attributes) {
  ScratchDir dir;
  // Root says 1 KV head, the file holds 2: k is [T, 2, D] where [T, 1, D] is required.
  const std::string p = valid_file(dir);
  set_int_attr(p, "num_kv_heads", 1);
  expect_input_error([&] { read_trace(p); },
                     {"trace.h5", "/layers/0/k", "[40, 2, 64]", "[40, 1, 64]"});
  // A v whose T differs from q_pre's.
  const std::string q = valid_file(dir, "t2.h5");
  reshape_dataset(q, "/layers/1/v", {39, 2, 64});
  expect_input_error([&] { read_trace(q); }, {"t2.h5", "/layers/1/v", "[39, 2, 64]"});
  // Layer count differs from num_layers.
  const std::string r = valid_file(dir, "t3.h5");
  set_int_attr(r, "num_layers", 3);
  expect_input_error([&] { read_trace(r); }, {"t3.h5", "/layers", "num_layers = 3"});
}

BOOST_AUTO_TEST_CASE(nan_inf_and_non_bf16_values) {
  ScratchDir dir;
  const std::string a = valid_file(dir, "nan.h5");
  poke_float(a, "/layers/1/v", 5, std::numeric_limits<float>::quiet_NaN());
  expect_input_error([&] { read_trace(a); },
                     {"nan.h5", "/layers/1/v", "flat index 5", "NaN or Inf"});
  expect_input_error([&] { read_trace_layer(a, 1); }, {"/layers/1/v"});
  BOOST_CHECK_NO_THROW(read_trace_layer(a, 0));  // the damage is in layer 1 only

  const std::string b = valid_file(dir, "inf.h5");
  poke_float(b, "/layers/0/q_post", 100, -std::numeric_limits<float>::infinity());
  expect_input_error([&] { read_trace(b); },
                     {"inf.h5", "/layers/0/q_post", "flat index 100", "NaN or Inf"});

  const std::string c = valid_file(dir, "bf.h5");
  poke_float(c, "/layers/0/k", 17, 0.1f);
  expect_input_error([&] { read_trace(c); },
                     {"bf.h5: /layers/0/k: value 0.1", "flat index 17", "not BF16-exact"});
  // The same damage beyond max_tokens is not read, so not reported.
  const std::string d = valid_file(dir, "late.h5");
  poke_float(d, "/layers/0/q_pre", (39 * 4 + 3) * 64 + 1, 0.1f);
  BOOST_CHECK_NO_THROW(read_trace(d, {}, 39));
  expect_input_error([&] { read_trace(d); }, {"/layers/0/q_pre", "not BF16-exact"});
}

BOOST_AUTO_TEST_CASE(missing_dataset_and_group) {
  ScratchDir dir;
  const std::string p = valid_file(dir);
  delete_link(p, "/layers/1/q_post");
  expect_input_error([&] { read_trace(p); }, {"trace.h5", "/layers/1/q_post", "missing"});
  const std::string q = valid_file(dir, "t2.h5");
  delete_link(q, "/layers/0");
  expect_input_error([&] { read_trace_layer(q, 0); }, {"t2.h5", "/layers/0/q_pre", "missing"});
}

BOOST_AUTO_TEST_CASE(missing_unreadable_and_non_hdf5_files) {
  ScratchDir dir;
  expect_input_error([&] { read_trace(dir.path("nope.h5")); }, {"nope.h5", "no such file"});
  expect_input_error([&] { read_trace_meta(dir.path("nope.h5")); }, {"no such file"});
  {
    std::ofstream os(dir.path("text.h5"));
    os << "not hdf5\n";
  }
  expect_input_error([&] { read_trace(dir.path("text.h5")); }, {"text.h5", "not an HDF5 file"});
  expect_input_error([&] { read_trace(dir.dir.string()); }, {"is a directory"});
}

BOOST_AUTO_TEST_CASE(writer_rejects_bad_directory) {
  ScratchDir dir;
  const std::string p = dir.path("no/such/dir/t.h5");
  expect_input_error([&] { write_trace(p, small_trace()); },
                     {"t.h5", "directory", "does not exist"});
  BOOST_TEST(dir.listing().empty());
}

BOOST_AUTO_TEST_CASE(invalid_trace_writes_nothing) {
  ScratchDir dir;
  const std::string p = dir.path("bad.h5");
  Trace t = small_trace();
  t.layers[1].k[17] = 0.1f;  // not BF16-exact
  expect_input_error([&] { write_trace(p, t); },
                     {"bad.h5", "/layers/1/k", "flat index 17", "not BF16-exact"});
  t = small_trace();
  t.layers[0].v[3] = std::numeric_limits<float>::quiet_NaN();
  expect_input_error([&] { write_trace(p, t); }, {"/layers/0/v", "NaN"});
  t = small_trace();
  t.layers.pop_back();
  expect_input_error([&] { write_trace(p, t); }, {"1 layers", "num_layers = 2"});
  t = small_trace();
  expect_input_error([&] { write_trace(p, t, true, {{"schema", "x"}}); }, {"schema", "overwrite"});
  BOOST_TEST(dir.listing().empty());
}

BOOST_AUTO_TEST_CASE(failure_after_the_temporary_exists_removes_it) {
  // An empty extra-attribute name is refused by HDF5 itself, after the temporary file has
  // been created and partly written: the RAII guard must remove it, and the target path
  // (which already holds an older good file) must keep its old content.
  ScratchDir dir;
  const std::string p = dir.path("keep.h5");
  const Trace old = small_trace(1);
  write_trace(p, old);
  expect_input_error(
      [&] {
        write_trace(p, small_trace(2), true, {{"", "x"}});
      },
      {"keep.h5", "cannot create"});
  BOOST_TEST(dir.listing() == std::vector<std::string>{"keep.h5"});
  check_equal(old, read_trace(p));
}

BOOST_AUTO_TEST_CASE(overwrites_an_existing_file_atomically) {
  ScratchDir dir;
  const std::string p = dir.path("t.h5");
  write_trace(p, small_trace(1));
  const Trace b = small_trace(2, 30);
  write_trace(p, b);
  check_equal(b, read_trace(p));
  BOOST_TEST(dir.listing().size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
