#include "mac/verify/report.hpp"

#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"
#include "mac/io/schema.hpp"
#include "mac/verify/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>
#include <vector>

namespace mac::verify {
namespace {

namespace vs = io::schema::verify;
namespace rk = io::schema::verify::report;
namespace mk = io::schema::verify::metrics;
namespace ck = io::schema::verify::cases;
namespace hk = io::schema::verify::heads;
namespace fk = io::schema::verify::case_file;

constexpr const char* kSchema = io::schema::verify::kReportName;
constexpr int64_t kVersion = io::schema::verify::kVersion;
// The file formats (docs/verification.md): fixed-length string attributes, contiguous numeric
// datasets, variable-length string datasets.
constexpr h5::Str kStringDatasets = h5::Str::kVariable;

// Field tables: one place lists what the report holds per case and per head. A case's
// counters and error maxima are its heads' summed or maximised, under the same names.
template <typename Row, typename V>
struct Field {
  const char* name;
  V Row::*p;
};
template <typename Row>
std::vector<Field<Row, int64_t>> counters() {
  return {{mk::kEligible, &Row::eligible},
          {mk::kHits, &Row::hits},
          {mk::kExpectedHits, &Row::expected_hits},
          {mk::kDecisionMismatch, &Row::decision_mismatch},
          {mk::kKeysRead, &Row::keys_read},
          {mk::kKeysExpected, &Row::keys_expected},
          {mk::kKeysFull, &Row::keys_full},
          {mk::kKeysMismatch, &Row::keys_mismatch},
          {mk::kEntriesChecked, &Row::entries_checked},
          {mk::kEntryMismatch, &Row::entry_mismatch},
          {mk::kBitChecked, &Row::bit_checked},
          {mk::kBitMismatch, &Row::bit_mismatch}};
}
template <typename Row>
std::vector<Field<Row, double>> error_maxima() {
  return {{mk::kRelL2Max, &Row::rel_l2_max},
          {mk::kMaxAbsErr, &Row::max_abs_err},
          {mk::kLseErrMax, &Row::lse_err_max},
          {mk::kEntryRelL2Max, &Row::entry_rel_l2_max},
          {mk::kEntryLseErrMax, &Row::entry_lse_err_max},
          {mk::kMacVsFullRelL2Max, &Row::mac_vs_full_rel_l2_max}};
}
template <typename Row, typename V>
std::vector<Field<Row, V>> with(std::vector<Field<Row, V>> fields,
                                std::initializer_list<Field<Row, V>> more) {
  fields.insert(fields.begin(), more);
  return fields;
}
const std::vector<Field<CaseResult, int64_t>>& case_i64() {
  static const auto f = with(counters<CaseResult>(), {{ck::kHeadSteps, &CaseResult::head_steps}});
  return f;
}
const std::vector<Field<CaseResult, double>>& case_f64() {
  static const auto f = with(error_maxima<CaseResult>(), {{mk::kWallS, &CaseResult::wall_s}});
  return f;
}
const std::vector<Field<HeadMetrics, int64_t>>& head_i64() {
  static const auto f = with(counters<HeadMetrics>(), {{hk::kSteps, &HeadMetrics::steps},
                                                       {hk::kPlanted, &HeadMetrics::planted}});
  return f;
}
const std::vector<Field<HeadMetrics, double>>& head_f64() {
  static const auto f =
      with(error_maxima<HeadMetrics>(), {{hk::kMinAbsMargin, &HeadMetrics::min_abs_margin}});
  return f;
}

/*! The report's string attributes, for write_report and read_report alike. `since_plugins`:
 *  added with the plugin route (or later), so a report written before reads it as `missing`. */
struct StringAttr {
  const char* name;
  std::string ReportMeta::*p;
  bool since_plugins;
  const char* missing;
};
const std::vector<StringAttr>& string_attrs() {
  static const std::vector<StringAttr> a = {
      {io::schema::kGitCommit, &ReportMeta::git_commit, false, ""},
      {rk::kDeclaredCommit, &ReportMeta::declared_commit, true, ""},
      {vs::kDevice, &ReportMeta::device, false, ""},
      {rk::kMode, &ReportMeta::mode, false, ""},
      {vs::kImpl, &ReportMeta::impl, false, ""},
      {rk::kImplSha256, &ReportMeta::impl_sha256, true, ""},
      {rk::kImplDeclared, &ReportMeta::impl_declared, true, ""},
      {rk::kImplCaps, &ReportMeta::impl_caps, true, ""},
      {rk::kNonceSource, &ReportMeta::nonce_source, true, "none"},
      {rk::kGrading, &ReportMeta::grading, true, ""},
      {rk::kFinished, &ReportMeta::finished, true, ""},
      {rk::kEnvironment, &ReportMeta::environment, true, ""},
      {rk::kSubset, &ReportMeta::subset, false, ""},
      {rk::kShard, &ReportMeta::shard, false, ""},
      {vs::kCommand, &ReportMeta::command, false, ""},
      {rk::kCreated, &ReportMeta::created, false, ""},
      {vs::kMatrixFnv1a, &ReportMeta::matrix_sha, false, ""}};
  return a;
}

/*! One numeric column of a report's group: a 1-D dataset of `n` elements whose file type
 *  is T's class and size (HDF5 would otherwise convert, clamping an int64 into int8), so a
 *  column shorter than the cases it describes is refused instead of read past. */
template <typename T>
std::vector<T> column(hid_t g, const std::string& path, const char* group, const char* name,
                      size_t n) {
  const h5::Dataset ds = h5::open_dataset(g, name);
  constexpr H5T_class_t cls = std::is_integral_v<T> ? H5T_INTEGER : H5T_FLOAT;
  require(ds.type_class == cls && ds.type_size == sizeof(T) && ds.dims.size() == 1, "report '",
          path, "': /", group, "/", name, " is not a 1-D ",
          std::is_integral_v<T> ? "integer" : "float", " dataset of ", sizeof(T), " bytes");
  require(ds.dims[0] == n, "report '", path, "': /", group, "/", name, " has ", ds.dims[0],
          " elements, expected ", n);
  return h5::read<T>(g, name, static_cast<int64_t>(n));
}

/*! A string column of `n` elements. */
std::vector<std::string> string_column(hid_t g, const std::string& path, const char* group,
                                       const char* name, size_t n) {
  auto v = h5::read_strings(g, name);
  require(v.size() == n, "report '", path, "': /", group, "/", name, " has ", v.size(),
          " elements, expected ", n);
  return v;
}

/*! A counter read from a report: never negative. */
int64_t counter(int64_t v, const std::string& path, const char* group, const char* name,
                size_t row) {
  require(v >= 0, "report '", path, "': /", group, "/", name, "[", row, "] = ", v,
          " is negative (a count)");
  return v;
}

}  // namespace

std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

std::string nonce_text(uint64_t nonce) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(nonce));
  return b;
}

int Report::count(CaseStatus s) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(),
                                        [&](const CaseResult& c) { return c.status == s; }));
}

void write_report(const std::string& path, const Report& r) {
  io::write_h5_atomically(path, [&](hid_t f) {
    const auto& m = r.meta;
    h5::write_attr(f, io::schema::kSchema, kSchema);
    h5::write_attr(f, io::schema::kVersion, kVersion);
    for (const auto& a : string_attrs()) h5::write_attr(f, a.name, m.*(a.p));
    h5::write_attr(f, rk::kAbiVersion, int64_t{m.abi_version});
    h5::write_attr(f, vs::kNonce, nonce_text(m.nonce));
    h5::write_attr(f, rk::kTrials, int64_t{m.trials});
    h5::write_attr(f, rk::kTolOutRelL2, m.tol.out_rel_l2);
    h5::write_attr(f, rk::kTolLse, m.tol.lse);
    h5::write_attr(f, rk::kTolEntryRelL2, m.tol.entry_rel_l2);
    h5::write_attr(f, rk::kTolEntryLse, m.tol.entry_lse);
    h5::write_attr(f, rk::kWallS, m.wall_s);
    h5::write_attr(f, rk::kThreads, int64_t{m.threads});
    h5::write_attr(f, rk::kNumCases, static_cast<int64_t>(r.cases.size()));
    h5::write_attr(f, rk::kPassed, int64_t{r.count(CaseStatus::kPass)});
    h5::write_attr(f, rk::kFailed, int64_t{r.count(CaseStatus::kFail)});
    h5::write_attr(f, rk::kSkipped, int64_t{r.count(CaseStatus::kSkip)});
    h5::write_attr(f, rk::kErrors, int64_t{r.count(CaseStatus::kError)});
    h5::write_attr(f, rk::kNotApplicable, int64_t{r.count(CaseStatus::kNotApplicable)});
    h5::write_attr(f, rk::kResult, r.result());

    {
      const h5::Handle cases = h5::create_group(f, ck::kGroup);
      const hid_t g = cases.get();
      std::vector<int64_t> id;
      std::vector<int8_t> st;
      std::vector<int64_t> trials;
      std::vector<std::string> fam, line, message, replay;
      for (const auto& c : r.cases) {
        id.push_back(c.spec.id);
        st.push_back(static_cast<int8_t>(c.status));
        trials.push_back(c.trials);
        fam.push_back(c.spec.family);
        line.push_back(c.spec.to_line());
        message.push_back(c.message);
        replay.push_back(c.replay);
      }
      h5::write(g, ck::kId, id);
      h5::write(g, vs::kStatus, st);
      h5::write(g, ck::kTrials, trials);
      h5::write_strings(g, ck::kFamily, fam, kStringDatasets);
      h5::write_strings(g, ck::kLine, line, kStringDatasets);
      h5::write_strings(g, vs::kMessage, message, kStringDatasets);
      h5::write_strings(g, ck::kReplay, replay, kStringDatasets);
      for (const auto& fl : case_i64()) {
        std::vector<int64_t> v;
        for (const auto& c : r.cases) v.push_back(c.*(fl.p));
        h5::write(g, fl.name, v);
      }
      for (const auto& fl : case_f64()) {
        std::vector<double> v;
        for (const auto& c : r.cases) v.push_back(c.*(fl.p));
        h5::write(g, fl.name, v);
      }
      // The limits each case was checked against (the run's tolerances times the case's
      // conditioning factor), so a reviewer need not recompute them.
      std::vector<double> t_out, t_lse, t_entry, t_entry_lse;
      for (const auto& c : r.cases) {
        const double k = r.meta.tol.conditioning(c.spec);
        t_out.push_back(r.meta.tol.out_rel_l2 * k);
        t_lse.push_back(r.meta.tol.lse);
        t_entry.push_back(r.meta.tol.entry_rel_l2 * k);
        t_entry_lse.push_back(r.meta.tol.entry_lse);
      }
      h5::write(g, rk::kTolOutRelL2, t_out);
      h5::write(g, rk::kTolLse, t_lse);
      h5::write(g, rk::kTolEntryRelL2, t_entry);
      h5::write(g, rk::kTolEntryLse, t_entry_lse);
    }
    {
      const h5::Handle heads = h5::create_group(f, hk::kGroup);
      const hid_t g = heads.get();
      std::vector<int64_t> cid, req, head;
      std::vector<int8_t> failed;
      for (const auto& c : r.cases)
        for (const auto& h : c.heads) {
          cid.push_back(c.spec.id);
          req.push_back(h.request);
          head.push_back(h.head);
          failed.push_back(h.failed ? 1 : 0);
        }
      h5::write(g, vs::kCaseId, cid);
      h5::write(g, hk::kRequest, req);
      h5::write(g, hk::kHead, head);
      h5::write(g, hk::kFailed, failed);
      for (const auto& fl : head_i64()) {
        std::vector<int64_t> v;
        for (const auto& c : r.cases)
          for (const auto& h : c.heads) v.push_back(h.*(fl.p));
        h5::write(g, fl.name, v);
      }
      for (const auto& fl : head_f64()) {
        std::vector<double> v;
        for (const auto& c : r.cases)
          for (const auto& h : c.heads) v.push_back(h.*(fl.p));
        h5::write(g, fl.name, v);
      }
    }
  });
}

Report read_report(const std::string& path) {
  const h5::Handle file = h5::open_file(path);
  const hid_t f = file.get();
  Report r;
  require(h5::attr_string(f, io::schema::kSchema) == kSchema, "report '", path, "': schema is not ",
          kSchema);
  const auto v = h5::attr_int64(f, io::schema::kVersion);
  require(v == kVersion, "report '", path, "': version ", v, " is not ", kVersion);
  auto& m = r.meta;
  // Attributes added with the plugin route (or later) are optional: a report written before
  // them reads as a run of a built-in implementation on the matrix's own seeds, one trial.
  for (const auto& a : string_attrs())
    m.*(a.p) = !a.since_plugins || h5::has_attr(f, a.name) ? h5::attr_string(f, a.name)
                                                           : std::string(a.missing);
  m.abi_version =
      h5::has_attr(f, rk::kAbiVersion) ? static_cast<int>(h5::attr_int64(f, rk::kAbiVersion)) : 0;
  m.nonce = h5::has_attr(f, vs::kNonce)
                ? std::strtoull(h5::attr_string(f, vs::kNonce).c_str(), nullptr, 0)
                : 0;
  const int64_t run_trials = h5::has_attr(f, rk::kTrials) ? h5::attr_int64(f, rk::kTrials) : 1;
  require(run_trials >= 1 && run_trials <= std::numeric_limits<int>::max(), "report '", path,
          "': trials = ", run_trials, " is outside [1, ", std::numeric_limits<int>::max(), "]");
  m.trials = static_cast<int>(run_trials);
  m.tol.out_rel_l2 = h5::attr_double(f, rk::kTolOutRelL2);
  m.tol.lse = h5::attr_double(f, rk::kTolLse);
  m.tol.entry_rel_l2 = h5::attr_double(f, rk::kTolEntryRelL2);
  m.tol.entry_lse = h5::attr_double(f, rk::kTolEntryLse);
  // Not stored as a flag: only the tight CPU limits are logit-conditioned (Tolerances::cpu),
  // the same test summary_table uses.
  m.tol.logit_conditioned = m.tol.out_rel_l2 < 1e-3;
  m.wall_s = h5::attr_double(f, rk::kWallS);
  m.threads = static_cast<int>(h5::attr_int64(f, rk::kThreads));
  h5::Handle group = h5::open_group(f, ck::kGroup);
  hid_t g = group.get();
  // Every column is checked against the case count `id` declares, its dtype and its
  // values' range before it is used (a merge trusts nothing a report says).
  const auto id = h5::read<int64_t>(g, ck::kId);
  const size_t n = id.size();
  const auto st = column<int8_t>(g, path, ck::kGroup, vs::kStatus, n);
  const auto line = string_column(g, path, ck::kGroup, ck::kLine, n);
  const auto message = string_column(g, path, ck::kGroup, vs::kMessage, n);
  // Columns added with --trials and the merged certificate: one trial, no replay command.
  const auto trials = h5::exists(g, ck::kTrials)
                          ? column<int64_t>(g, path, ck::kGroup, ck::kTrials, n)
                          : std::vector<int64_t>(n, 1);
  const auto replay = h5::exists(g, ck::kReplay)
                          ? string_column(g, path, ck::kGroup, ck::kReplay, n)
                          : std::vector<std::string>(n);
  r.cases.resize(n);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    r.cases[i].spec = parse_case(line[i]);
    require(r.cases[i].spec.id == id[i], "report '", path, "': /cases/id[", i, "] = ", id[i],
            " is not the id of its line (", r.cases[i].spec.id, ")");
    require(index.emplace(id[i], i).second, "report '", path, "': case ", id[i], " appears twice");
    require(st[i] >= static_cast<int>(CaseStatus::kPass) &&
                st[i] <= static_cast<int>(CaseStatus::kNotApplicable),
            "report '", path, "': /cases/status[", i, "] = ", int{st[i]},
            " is not a case status (0 pass, 1 fail, 2 skip, 3 error, 4 not applicable)");
    r.cases[i].status = static_cast<CaseStatus>(st[i]);
    r.cases[i].message = message[i];
    r.cases[i].replay = replay[i];
    require(trials[i] >= 0, "report '", path, "': /cases/trials[", i, "] = ", trials[i],
            " is negative (a count)");
    r.cases[i].trials = trials[i];
  }
  for (const auto& fl : case_i64()) {
    const auto v = column<int64_t>(g, path, ck::kGroup, fl.name, n);
    for (size_t i = 0; i < n; ++i) r.cases[i].*(fl.p) = counter(v[i], path, ck::kGroup, fl.name, i);
  }
  for (const auto& fl : case_f64()) {
    const auto v = column<double>(g, path, ck::kGroup, fl.name, n);
    for (size_t i = 0; i < n; ++i) r.cases[i].*(fl.p) = v[i];
  }
  group = h5::open_group(f, hk::kGroup);
  g = group.get();
  const auto cid = h5::read<int64_t>(g, vs::kCaseId);
  const size_t rows = cid.size();
  const auto req = column<int64_t>(g, path, hk::kGroup, hk::kRequest, rows);
  const auto head = column<int64_t>(g, path, hk::kGroup, hk::kHead, rows);
  const auto failed = column<int8_t>(g, path, hk::kGroup, hk::kFailed, rows);
  std::vector<std::pair<size_t, size_t>> where(rows);
  for (size_t k = 0; k < rows; ++k) {
    auto it = index.find(cid[k]);
    require(it != index.end(), "report '", path, "': head row ", k, " names unknown case ", cid[k]);
    auto& c = r.cases[it->second];
    require(req[k] >= 0 && req[k] < c.spec.batch && head[k] >= 0 && head[k] < c.spec.Hq() &&
                (failed[k] == 0 || failed[k] == 1),
            "report '", path, "': head row ", k, " (request ", req[k], ", head ", head[k],
            ", failed ", int{failed[k]}, ") is outside case ", cid[k], "'s ", c.spec.batch,
            " requests and ", c.spec.Hq(), " heads");
    HeadMetrics hm;
    hm.request = static_cast<int>(req[k]);
    hm.head = static_cast<int>(head[k]);
    hm.failed = failed[k] != 0;
    c.heads.push_back(hm);
    where[k] = {it->second, c.heads.size() - 1};
  }
  for (const auto& fl : head_i64()) {
    const auto v = column<int64_t>(g, path, hk::kGroup, fl.name, rows);
    for (size_t k = 0; k < rows; ++k)
      r.cases[where[k].first].heads[where[k].second].*(fl.p) =
          counter(v[k], path, hk::kGroup, fl.name, k);
  }
  for (const auto& fl : head_f64()) {
    const auto v = column<double>(g, path, hk::kGroup, fl.name, rows);
    for (size_t k = 0; k < rows; ++k) r.cases[where[k].first].heads[where[k].second].*(fl.p) = v[k];
  }
  return r;
}

Report merge_reports(const std::vector<Report>& shards) {
  require(!shards.empty(), "merge: no reports given");
  Report out;
  out.meta = shards.front().meta;
  std::string shard_list;
  for (const auto& s : shards) {
    require(s.meta.git_commit == out.meta.git_commit, "merge: git commits differ (",
            s.meta.git_commit, " vs ", out.meta.git_commit, ")");
    require(s.meta.mode == out.meta.mode, "merge: modes differ (", s.meta.mode, " vs ",
            out.meta.mode, ")");
    require(s.meta.matrix_sha == out.meta.matrix_sha, "merge: matrices differ (", s.meta.matrix_sha,
            " vs ", out.meta.matrix_sha, ")");
    require(s.meta.impl_sha256 == out.meta.impl_sha256, "merge: implementations differ (sha256 ",
            s.meta.impl_sha256, " vs ", out.meta.impl_sha256, ")");
    require(s.meta.nonce == out.meta.nonce, "merge: nonces differ (", nonce_text(s.meta.nonce),
            " vs ", nonce_text(out.meta.nonce), "); give every shard the same --nonce");
    require(s.meta.trials == out.meta.trials, "merge: trials differ (", s.meta.trials, " vs ",
            out.meta.trials, "); give every shard the same --trials");
    require(s.meta.grading == out.meta.grading, "merge: gradings differ (", s.meta.grading, " vs ",
            out.meta.grading, ")");
    out.meta.created = std::min(out.meta.created, s.meta.created);
    out.meta.finished = std::max(out.meta.finished, s.meta.finished);
    out.meta.wall_s = std::max(out.meta.wall_s, s.meta.wall_s);
    shard_list += (shard_list.empty() ? "" : ",") + s.meta.shard;
    if (s.meta.device != out.meta.device &&
        out.meta.device.find(s.meta.device) == std::string::npos)
      out.meta.device += "; " + s.meta.device;
    for (const auto& c : s.cases) out.cases.push_back(c);
  }
  std::sort(out.cases.begin(), out.cases.end(),
            [](const CaseResult& a, const CaseResult& b) { return a.spec.id < b.spec.id; });
  for (size_t i = 1; i < out.cases.size(); ++i)
    require(out.cases[i].spec.id != out.cases[i - 1].spec.id, "merge: case ", out.cases[i].spec.id,
            " appears in more than one report");
  out.meta.shard = "merged:" + shard_list;
  return out;
}

std::string Report::result() const {
  if (!ok()) return "FAIL";
  if (count(CaseStatus::kSkip) > 0 || count(CaseStatus::kPass) == 0) return "INCOMPLETE";
  return "PASS";
}

int Report::exit_code() const {
  const std::string v = result();
  return v == "PASS" ? 0 : v == "FAIL" ? 1 : 3;
}

namespace {
/*! What a reviewer must know about where the nonce came from: only a nonce drawn by the run
 *  itself keeps the inputs unknown to the implementation beforehand. */
std::string nonce_caveat(const ReportMeta& m) {
  if (m.nonce_source == "given")
    return ": chosen by whoever ran the driver (--nonce), so the inputs could be known in advance";
  if (m.nonce_source == "none")
    return ": the matrix's own seeds, the same in every run, so an answer cached from another "
           "run could pass";
  if (m.nonce_source == "replay") return ": taken from the replay file";
  return "";
}
}  // namespace

std::string certificate_markdown(const Report& r, const std::vector<std::string>& replays,
                                 const std::string& environment) {
  const auto& m = r.meta;
  std::ostringstream os;
  os << "# mac-verify certificate: " << r.result() << "\n\n";
  os << "| | |\n|---|---|\n";
  os << "| implementation | " << m.impl << " |\n";
  if (!m.impl_declared.empty()) os << "| declared name, version | " << m.impl_declared << " |\n";
  if (!m.impl_sha256.empty()) os << "| implementation SHA-256 | " << m.impl_sha256 << " |\n";
  if (m.abi_version) os << "| plugin ABI version | " << m.abi_version << " |\n";
  os << "| device | " << m.device << " |\n";
  os << "| mode | " << m.mode << " |\n";
  os << "| driver commit (build) | " << m.git_commit << " |\n";
  if (!m.declared_commit.empty())
    os << "| driver commit (declared, not verified) | " << m.declared_commit << " |\n";
  os << "| matrix FNV-1a | " << m.matrix_sha << " |\n";
  os << "| subset / shard | " << m.subset << " / " << m.shard << " |\n";
  os << "| nonce | " << nonce_text(m.nonce) << " (" << m.nonce_source << ")" << nonce_caveat(m)
     << " |\n";
  os << "| trials per case | " << m.trials
     << (m.trials > 1 ? " (each with its own nonce derived from the run's; a case passes only if "
                        "every trial does)"
                      : "")
     << " |\n";
  if (!m.grading.empty()) os << "| graded against | " << m.grading << " |\n";
  os << "| started | " << m.created << " |\n";
  if (!m.finished.empty()) os << "| finished | " << m.finished << " |\n";
  os << "| wall | " << m.wall_s << " s |\n";
  os << "| command | `" << m.command << "` |\n\n";
  os << "## Environment\n\n```\n" << environment << m.environment << "```\n\n";
  if (!m.impl_caps.empty()) os << "## Declared capabilities\n\n```\n" << m.impl_caps << "```\n\n";
  os << "## Tolerances\n\nout rel L2 <= " << m.tol.out_rel_l2 << ", |dL| <= " << m.tol.lse
     << "·max(1,|L|), entry rel L2 <= " << m.tol.entry_rel_l2
     << ", entry |dL| <= " << m.tol.entry_lse << "·max(1,|L|)"
     << (m.tol.logit_conditioned ? "; rel L2 limits x max(1, s²/64) for logits:s cases" : "")
     << ".\n\n";
  struct Row {
    int pass = 0, fail = 0, skip = 0, err = 0, na = 0;
    double rel = 0, lse = 0, erel = 0;
  };
  std::map<std::string, Row> fam;
  for (const auto& c : r.cases) {
    Row& w = fam[c.spec.family];
    w.pass += c.status == CaseStatus::kPass;
    w.fail += c.status == CaseStatus::kFail;
    w.skip += c.status == CaseStatus::kSkip;
    w.err += c.status == CaseStatus::kError;
    w.na += c.status == CaseStatus::kNotApplicable;
    if (c.status == CaseStatus::kPass || c.status == CaseStatus::kFail) {
      w.rel = std::max(w.rel, c.rel_l2_max);
      w.lse = std::max(w.lse, c.lse_err_max);
      w.erel = std::max(w.erel, c.entry_rel_l2_max);
    }
  }
  os << "## Families\n\n| family | pass | fail | skip | error | n/a | worst out rel L2 | worst "
        "|dL| | worst entry rel L2 |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [k, w] : fam)
    os << "| " << k << " | " << w.pass << " | " << w.fail << " | " << w.skip << " | " << w.err
       << " | " << w.na << " | " << w.rel << " | " << w.lse << " | " << w.erel << " |\n";
  os << "\n## Failures\n\n";
  size_t k = 0;
  for (const auto& c : r.cases) {
    if (c.status != CaseStatus::kFail && c.status != CaseStatus::kError) continue;
    os << "* [" << to_string(c.status) << "] " << c.spec.describe() << ": " << c.message << "\n";
    const std::string& replay = !c.replay.empty()    ? c.replay
                                : k < replays.size() ? replays[k]
                                                     : c.replay;
    if (!replay.empty()) os << "  replay: `" << replay << "`\n";
    ++k;
  }
  if (k == 0) os << "none\n";
  os << "\nRESULT: " << r.result() << " (" << r.count(CaseStatus::kPass) << " passed, "
     << r.count(CaseStatus::kFail) << " failed, " << r.count(CaseStatus::kError) << " errors, "
     << r.count(CaseStatus::kSkip) << " skipped, " << r.count(CaseStatus::kNotApplicable)
     << " not applicable)\n";
  return os.str();
}

std::string summary_table(const Report& r) {
  struct Row {
    int n = 0, pass = 0, fail = 0, skip = 0, err = 0, na = 0;
    int64_t head_steps = 0, hits = 0, mism = 0, keys = 0, keys_full = 0, bit = 0;
    double rel = 0, abs = 0, lse = 0, erel = 0, wall = 0;
  };
  std::map<std::string, Row> fam;
  Row tot;
  for (const auto& c : r.cases) {
    for (Row* rw : {&fam[c.spec.family], &tot}) {
      ++rw->n;
      rw->pass += c.status == CaseStatus::kPass;
      rw->fail += c.status == CaseStatus::kFail;
      rw->skip += c.status == CaseStatus::kSkip;
      rw->err += c.status == CaseStatus::kError;
      rw->na += c.status == CaseStatus::kNotApplicable;
      if (c.status == CaseStatus::kSkip || c.status == CaseStatus::kNotApplicable) continue;
      rw->head_steps += c.head_steps;
      rw->hits += c.expected_hits;
      rw->mism += c.decision_mismatch;
      rw->keys += c.keys_expected;
      rw->keys_full += c.keys_full;
      rw->bit += c.bit_checked;
      rw->rel = std::max(rw->rel, c.rel_l2_max);
      rw->abs = std::max(rw->abs, c.max_abs_err);
      rw->lse = std::max(rw->lse, c.lse_err_max);
      rw->erel = std::max(rw->erel, c.entry_rel_l2_max);
      rw->wall += c.wall_s;
    }
  }
  std::ostringstream os;
  char b[512];
  std::snprintf(
      b, sizeof b, "mac-verify: %s on %s, commit %s%s, %s\n", r.meta.impl.c_str(),
      r.meta.device.c_str(), r.meta.git_commit.c_str(),
      r.meta.declared_commit.empty() ? "" : (" (declared " + r.meta.declared_commit + ")").c_str(),
      r.meta.subset.c_str());
  os << b;
  std::snprintf(b, sizeof b,
                "%-12s %5s %5s %5s %5s %5s %5s %9s %7s %6s %7s %10s %10s %10s %10s %8s\n", "family",
                "cases", "pass", "FAIL", "skip", "ERR", "n/a", "headsteps", "hit%", "dmis", "kv%",
                "relL2max", "maxabs", "lseerr", "entryL2", "case_s");
  os << b;
  auto line = [&](const std::string& name, const Row& w) {
    std::snprintf(
        b, sizeof b,
        "%-12s %5d %5d %5d %5d %5d %5d %9lld %6.1f%% %6lld %6.1f%% %10.3e %10.3e %10.3e %10.3e "
        "%8.1f\n",
        name.c_str(), w.n, w.pass, w.fail, w.skip, w.err, w.na,
        static_cast<long long>(w.head_steps),
        w.head_steps ? 100.0 * static_cast<double>(w.hits) / static_cast<double>(w.head_steps)
                     : 0.0,
        static_cast<long long>(w.mism),
        w.keys_full ? 100.0 * static_cast<double>(w.keys) / static_cast<double>(w.keys_full) : 0.0,
        w.rel, w.abs, w.lse, w.erel, w.wall);
    os << b;
  };
  for (const auto& [k, w] : fam) line(k, w);
  line("TOTAL", tot);
  std::snprintf(
      b, sizeof b,
      "tolerances: out rel L2 <= %.3g, |dL| <= %.3g*max(1,|L|), entry rel L2 <= %.3g%s; wall "
      "%.1fs\n",
      r.meta.tol.out_rel_l2, r.meta.tol.lse, r.meta.tol.entry_rel_l2,
      r.meta.tol.out_rel_l2 >= 1e-3 ? "" : " (rel L2 limits x max(1, s^2/64) for logits:s cases)",
      r.meta.wall_s);
  os << b;
  // Failing cases by the kind of their first failure.
  std::map<std::string, int> kinds;
  for (const auto& c : r.cases) {
    if (c.status != CaseStatus::kFail && c.status != CaseStatus::kError) continue;
    const std::string& m = c.message;
    std::string k = "other";
    for (const char* key :
         {"decision", "keys read", "output rel L2", "LSE error", "ring entry", "prefill entries",
          "device error flags", "bit-identical", "CUDA", "gate state"})
      if (m.find(key) != std::string::npos) {
        k = key;
        break;
      }
    if (c.status == CaseStatus::kError) k = "error: " + k;
    ++kinds[k];
  }
  if (!kinds.empty()) {
    os << "failing cases by first failure:";
    for (const auto& [k, n] : kinds) os << "  " << k << " " << n;
    os << "\n";
  }
  int shown = 0;
  for (const auto& c : r.cases) {
    if (c.status != CaseStatus::kFail && c.status != CaseStatus::kError) continue;
    if (shown++ < 40)
      os << "  [" << to_string(c.status) << "] " << c.spec.describe() << "\n      " << c.message
         << "\n";
  }
  if (shown > 40) os << "  ... and " << shown - 40 << " more failing cases\n";
  os << "RESULT: " << r.result() << " (" << r.count(CaseStatus::kPass) << " passed, "
     << r.count(CaseStatus::kFail) << " failed, " << r.count(CaseStatus::kError) << " errors, "
     << r.count(CaseStatus::kSkip) << " skipped, " << r.count(CaseStatus::kNotApplicable)
     << " not applicable)\n";
  return os.str();
}

void write_failure_file(const std::string& path, const CaseResult& res, const ReportMeta& meta,
                        size_t max_input_bytes) {
  const CaseInputs in = make_inputs(with_nonce(res.spec, meta.nonce));
  io::write_h5_atomically(path, [&](hid_t f) {
    h5::write_attr(f, io::schema::kSchema, io::schema::verify::kCaseName);
    h5::write_attr(f, io::schema::kVersion, kVersion);
    h5::write_attr(f, vs::kCaseLine, res.spec.to_line());
    h5::write_attr(f, vs::kStatus, to_string(res.status));
    h5::write_attr(f, vs::kMessage, res.message);
    h5::write_attr(f, io::schema::kGitCommit, meta.git_commit);
    h5::write_attr(f, vs::kDevice, meta.device);
    h5::write_attr(f, vs::kImpl, meta.impl);
    h5::write_attr(f, vs::kNonce, nonce_text(meta.nonce));
    size_t bytes = 0;
    for (const auto& rq : in.requests)
      bytes += 4 * (rq.layer.q_pre.size() + rq.layer.q_post.size() + rq.layer.k.size() +
                    rq.layer.v.size());
    h5::write_attr(f, fk::kInputsStored, int64_t{bytes <= max_input_bytes ? 1 : 0});
    const int N = res.spec.batch, Hq = res.spec.Hq(), D = res.spec.D;
    for (int i = 0; i < N; ++i) {
      const auto& rq = in.requests[static_cast<size_t>(i)];
      const std::string gname = msg(fk::kRequestPrefix, i);
      const h5::Handle group = h5::create_group(f, gname);
      const hid_t g = group.get();
      h5::write_attr(g, fk::kPrompt, static_cast<int64_t>(rq.prompt));
      h5::write_attr(g, fk::kReady, int64_t{rq.ready ? 1 : 0});
      if (bytes <= max_input_bytes) {
        const hsize_t T = static_cast<hsize_t>(rq.layer.tokens);
        h5::write(g, io::schema::trace::kQPre,
                  {T, static_cast<hsize_t>(Hq), static_cast<hsize_t>(D)}, rq.layer.q_pre);
        h5::write(g, io::schema::trace::kQPost,
                  {T, static_cast<hsize_t>(Hq), static_cast<hsize_t>(D)}, rq.layer.q_post);
        h5::write(g, io::schema::trace::kK,
                  {T, static_cast<hsize_t>(res.spec.Hkv), static_cast<hsize_t>(D)}, rq.layer.k);
        h5::write(g, io::schema::trace::kV,
                  {T, static_cast<hsize_t>(res.spec.Hkv), static_cast<hsize_t>(D)}, rq.layer.v);
      }
      // Outputs per step: [S, Hq] and [S, Hq, D].
      const size_t S = res.steps.size();
      std::vector<int8_t> ehit, ahit;
      std::vector<int64_t> epos, apos, akeys, ekeys, position;
      std::vector<double> eout, aout, e_lse, alse, eent, aent, eentl, aentl, xout, xlse;
      for (size_t s = 0; s < S; ++s) {
        const auto& E = res.steps[s].expected[static_cast<size_t>(i)];
        const auto& A = res.steps[s].actual[static_cast<size_t>(i)];
        position.push_back(E[0].position);
        for (int h = 0; h < Hq; ++h) {
          const auto& e = E[static_cast<size_t>(h)];
          const auto& a = A[static_cast<size_t>(h)];
          ehit.push_back(e.hit);
          ahit.push_back(a.hit);
          epos.push_back(e.match_pos);
          apos.push_back(a.match_pos);
          ekeys.push_back(e.keys_read);
          akeys.push_back(a.keys_read);
          e_lse.push_back(e.out.lse);
          alse.push_back(a.lse);
          xlse.push_back(e.exact.lse);
          eentl.push_back(e.entry.lse);
          aentl.push_back(a.entry_lse);
          for (int d = 0; d < D; ++d) {
            eout.push_back(e.out.o[d]);
            xout.push_back(e.exact.o[d]);
            aout.push_back(static_cast<size_t>(d) < a.o.size() ? a.o[static_cast<size_t>(d)]
                                                               : std::nan(""));
            eent.push_back(e.entry.o.size() ? e.entry.o[d] : 0.0);
            aent.push_back(static_cast<size_t>(d) < a.entry_o.size()
                               ? a.entry_o[static_cast<size_t>(d)]
                               : std::nan(""));
          }
        }
      }
      const std::vector<hsize_t> sh = {S, static_cast<hsize_t>(Hq)},
                                 shd = {S, static_cast<hsize_t>(Hq), static_cast<hsize_t>(D)};
      h5::write(g, fk::kPosition, position);
      h5::write(g, fk::kExpectedHit, sh, ehit);
      h5::write(g, fk::kActualHit, sh, ahit);
      h5::write(g, fk::kExpectedMatchPos, sh, epos);
      h5::write(g, fk::kActualMatchPos, sh, apos);
      h5::write(g, fk::kExpectedKeysRead, sh, ekeys);
      h5::write(g, fk::kActualKeysRead, sh, akeys);
      h5::write(g, fk::kExpectedOut, shd, eout);
      h5::write(g, fk::kActualOut, shd, aout);
      h5::write(g, fk::kExpectedLse, sh, e_lse);
      h5::write(g, fk::kActualLse, sh, alse);
      h5::write(g, fk::kExactOut, shd, xout);
      h5::write(g, fk::kExactLse, sh, xlse);
      h5::write(g, fk::kExpectedEntryO, shd, eent);
      h5::write(g, fk::kActualEntryO, shd, aent);
      h5::write(g, fk::kExpectedEntryLse, sh, eentl);
      h5::write(g, fk::kActualEntryLse, sh, aentl);
    }
  });
}

std::string read_failure_case_line(const std::string& path) {
  const h5::Handle f = h5::open_file(path);
  require(
      h5::attr_string(f.get(), io::schema::kSchema) == std::string(io::schema::verify::kCaseName),
      "replay file '", path, "': schema is not mac-verify-case");
  return h5::attr_string(f.get(), vs::kCaseLine);
}

uint64_t read_failure_nonce(const std::string& path) {
  const h5::Handle f = h5::open_file(path);
  if (!h5::has_attr(f.get(), vs::kNonce)) return 0;
  return std::strtoull(h5::attr_string(f.get(), vs::kNonce).c_str(), nullptr, 0);
}

}  // namespace mac::verify
