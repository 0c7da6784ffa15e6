/*! \file run_dump.cpp
 *  \brief HDF5 reader/writer of the run dump ("mac-run" v1). Schema: docs/file-formats.md.
 *
 *  Every failure is one mac::InputError whose message starts with the file name and
 *  names the attribute or dataset. The HDF5 mechanics are mac::h5 (mac/io/h5.hpp).
 */
#include "mac/io/run_dump.hpp"

#include "file_kinds.hpp"
#include "mac/io/atomic_file.hpp"

#include <array>
#include <limits>

namespace mac::io {

using namespace detail;
using h5::shape_str;
namespace rn = schema::run;

void RunDump::resize(int64_t S, int64_t hq, int64_t d) {
  require(S >= 0 && hq >= 1 && d >= 1, "RunDump::resize: bad shape S = ", S, ", Hq = ", hq,
          ", D = ", d);
  steps = S;
  num_q_heads = hq;
  head_dim = d;
  const auto sh = static_cast<size_t>(S * hq);
  const auto shd = static_cast<size_t>(S * hq * d);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  position.assign(static_cast<size_t>(S), -1);
  hit.assign(sh, 0);
  match_pos.assign(sh, -1);
  d2.assign(sh, nan);
  out.assign(shd, nan);
  lse.assign(sh, nan);
  exact_out.assign(shd, nan);
  exact_lse.assign(sh, nan);
  kv_tokens_read.assign(sh, 0);
}

namespace {

void check_dump_shapes(const RunDump& d, const std::string& path) {
  require(d.steps >= 0 && d.num_q_heads >= 1 && d.head_dim >= 1, path,
          ": cannot write run dump: bad shape S = ", d.steps, ", Hq = ", d.num_q_heads,
          ", D = ", d.head_dim);
  const auto S = static_cast<size_t>(d.steps);
  const auto sh = S * static_cast<size_t>(d.num_q_heads);
  const auto shd = sh * static_cast<size_t>(d.head_dim);
  auto need = [&](size_t have, size_t want, const char* name) {
    require(have == want, path, ": cannot write run dump: ", name, " has ", have,
            " values, [S, Hq(, D)] = [", d.steps, ", ", d.num_q_heads, ", ", d.head_dim, "] needs ",
            want);
  };
  need(d.position.size(), S, "position");
  need(d.hit.size(), sh, "hit");
  need(d.match_pos.size(), sh, "match_pos");
  need(d.d2.size(), sh, "d2");
  need(d.out.size(), shd, "out");
  need(d.lse.size(), sh, "lse");
  need(d.exact_out.size(), shd, "exact_out");
  need(d.exact_lse.size(), sh, "exact_lse");
  need(d.kv_tokens_read.size(), sh, "kv_tokens_read");
}

/*! The int64 MacParams fields a dump holds only where they differ from their default: the
 *  policies (semantics §3.3) and the gate (§3.5). Absent, a field keeps its default, which is
 *  the run without that policy or gate, so dumps written before a field existed read as such. */
struct OptionalParam {
  const char* name;
  int64_t MacParams::*field;
};
const std::array<OptionalParam, 7>& optional_params() {
  static const std::array<OptionalParam, 7> fields = {{
      {rn::kDepthCap, &MacParams::depth_cap},
      {rn::kRefresh, &MacParams::refresh},
      {rn::kGateWindow, &MacParams::gate_window},
      {rn::kGateProbe, &MacParams::gate_probe},
      {rn::kGateMargin, &MacParams::gate_margin},
      {rn::kGateMinHit, &MacParams::gate_min_hit},
      {rn::kGateFixedBytes, &MacParams::gate_fixed_bytes},
  }};
  return fields;
}

}  // namespace

void write_run_dump(const std::string& path, const RunDump& d) {
  check_dump_shapes(d, path);
  write_h5_atomically(path, [&](hid_t r) {
    write_attr(r, schema::kSchema, rn::kName);
    write_attr(r, schema::kVersion, rn::kVersion);
    const StepperConfig& c = d.config;
    write_attr(r, rn::kTau, c.params.tau);
    write_attr(r, rn::kRing, c.params.ring);
    write_attr(r, rn::kTail, c.params.tail);
    write_attr(r, rn::kSinks, c.params.sinks);
    write_attr(r, rn::kGenMin, c.params.gen_min);
    for (const auto& f : optional_params())
      if (c.params.*f.field != MacParams{}.*f.field) write_attr(r, f.name, c.params.*f.field);
    write_attr(r, rn::kVariant, to_string(c.variant));
    write_attr(r, rn::kPrecision, to_string(c.precision));
    write_attr(r, rn::kPrefill, c.prefill);
    write_attr(r, rn::kLayer, d.layer);
    write_attr(r, rn::kPrefillMode, to_string(c.prefill_mode));
    write_attr(r, rn::kStorage, to_string(c.storage));
    write_attr(r, rn::kTraceSource, d.trace_source);

    const auto S = static_cast<hsize_t>(d.steps), H = static_cast<hsize_t>(d.num_q_heads),
               D = static_cast<hsize_t>(d.head_dim);
    const std::vector<hsize_t> s1 = {S}, sh = {S, H}, shd = {S, H, D};
    // Run dumps are large FP64 arrays that compress poorly; gzip level 1 + shuffle keeps
    // writing fast while still squeezing the int8/int64 columns.
    const int gz = 1;
    write_dataset(r, rn::kPosition, s1, d.position, gz);
    write_dataset(r, rn::kHit, sh, d.hit, gz);
    write_dataset(r, rn::kMatchPos, sh, d.match_pos, gz);
    write_dataset(r, rn::kD2, sh, d.d2, gz);
    write_dataset(r, rn::kOut, shd, d.out, gz);
    write_dataset(r, rn::kLse, sh, d.lse, gz);
    write_dataset(r, rn::kExactOut, shd, d.exact_out, gz);
    write_dataset(r, rn::kExactLse, sh, d.exact_lse, gz);
    write_dataset(r, rn::kKvTokensRead, sh, d.kv_tokens_read, gz);
  });
}

RunDump read_run_dump(const std::string& path) {
  h5::Handle f = h5::open_file(path);
  const hid_t r = f.get();
  check_schema(r, path, rn::kName, rn::kVersion);
  RunDump d;
  StepperConfig& c = d.config;
  c.params.tau = h5::attr_double(r, rn::kTau);
  c.params.ring = h5::attr_int64(r, rn::kRing);
  c.params.tail = h5::attr_int64(r, rn::kTail);
  c.params.sinks = h5::attr_int64(r, rn::kSinks);
  c.params.gen_min = h5::attr_int64(r, rn::kGenMin);
  for (const auto& f : optional_params())
    if (h5::has_attr(r, f.name)) c.params.*f.field = h5::attr_int64(r, f.name);
  c.variant = parse_attr(r, path, rn::kVariant, parse_variant);
  c.precision = parse_attr(r, path, rn::kPrecision, parse_precision);
  c.prefill = h5::attr_int64(r, rn::kPrefill);
  d.layer = h5::attr_int64(r, rn::kLayer);
  c.prefill_mode = parse_attr(r, path, rn::kPrefillMode, parse_prefill_mode);
  c.storage = parse_attr(r, path, rn::kStorage, parse_state_storage);
  d.trace_source = h5::attr_string(r, rn::kTraceSource);

  const h5::Dataset pos =
      open_dataset(r, path, rn::kPosition, 1, H5T_INTEGER, 0, "an integer dataset");
  const hsize_t S = pos.dims[0];
  const h5::Dataset out =
      open_dataset(r, path, rn::kOut, 3, H5T_FLOAT, 0, "a floating-point dataset");
  const std::vector<hsize_t>& dims = out.dims;
  require(dims[0] == S, path, ": /out has shape ", shape_str(dims), ", /position has ", S,
          " steps");
  const hsize_t H = dims[1], D = dims[2];
  require(H >= 1 && D >= 1, path, ": /out has shape ", shape_str(dims), " (Hq and D must be >= 1)");
  d.steps = static_cast<int64_t>(S);
  d.num_q_heads = static_cast<int64_t>(H);
  d.head_dim = static_cast<int64_t>(D);
  d.position = h5::read_rows<int64_t>(pos, S);
  d.out = h5::read_rows<double>(out, S);

  auto read_sh = [&](const char* name, H5T_class_t cls, auto& vec, bool with_d) {
    const int rank = with_d ? 3 : 2;
    const h5::Dataset ds =
        open_dataset(r, path, name, rank, cls, 0,
                     cls == H5T_INTEGER ? "an integer dataset" : "a floating-point dataset");
    const std::vector<hsize_t>& dd = ds.dims;
    const std::vector<hsize_t> want =
        with_d ? std::vector<hsize_t>{S, H, D} : std::vector<hsize_t>{S, H};
    require(dd == want, path, ": ", name, " has shape ", shape_str(dd), ", expected ",
            shape_str(want), " (from /position and /out)");
    vec = h5::read_rows<typename std::decay_t<decltype(vec)>::value_type>(ds, S);
  };
  read_sh(rn::kHit, H5T_INTEGER, d.hit, false);
  read_sh(rn::kMatchPos, H5T_INTEGER, d.match_pos, false);
  read_sh(rn::kD2, H5T_FLOAT, d.d2, false);
  read_sh(rn::kLse, H5T_FLOAT, d.lse, false);
  read_sh(rn::kExactOut, H5T_FLOAT, d.exact_out, true);
  read_sh(rn::kExactLse, H5T_FLOAT, d.exact_lse, false);
  read_sh(rn::kKvTokensRead, H5T_INTEGER, d.kv_tokens_read, false);
  return d;
}

}  // namespace mac::io
