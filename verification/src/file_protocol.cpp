// The file protocol: export a case's ABI inputs to HDF5, grade the outputs a user's program
// wrote, through the same ABI core (abi_case.hpp) as the plugin route.
#include "mac/verify/file_protocol.hpp"

#include "mac/io/atomic_file.hpp"
#include "mac/io/h5.hpp"
#include "mac/io/schema.hpp"
#include "mac/verify/report.hpp"
#include "mac/verify/sha256.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>

namespace mac::verify::files {
namespace {

namespace sch = io::schema;
namespace vs = io::schema::verify;
namespace fk = io::schema::verify::files;
namespace fs = std::filesystem;
using abi::AbiCase;

std::vector<hsize_t> dims(std::initializer_list<int64_t> d) {
  std::vector<hsize_t> v;
  for (int64_t x : d) v.push_back(static_cast<hsize_t>(x));
  return v;
}

/*! The bytes of arena tensor `t` as a vector of T (the tensor is packed). */
template <typename T>
std::vector<T> copy_tensor(const AbiCase& ab, int t) {
  const auto& d = ab.layout().t[t];
  std::vector<T> v(d.bytes / sizeof(T));
  // memcpy with a null pointer is undefined even for 0 bytes (an absent tensor's vector).
  if (d.bytes > 0) std::memcpy(v.data(), ab.arena() + d.offset, d.bytes);
  return v;
}

template <typename T>
void load_tensor(const AbiCase& ab, int t, const std::vector<T>& v) {
  const auto& d = ab.layout().t[t];
  require(v.size() * sizeof(T) == d.bytes, "internal: ", abi::tensor_name(t), " size");
  if (d.bytes > 0) std::memcpy(ab.arena() + d.offset, v.data(), d.bytes);
}

/*! A float tensor of dtype F32/BF16 as float32 values (the files store F32 or raw BF16). */
std::vector<float> as_f32(const AbiCase& ab, int t) {
  const auto& d = ab.layout().t[t];
  const size_t n = d.bytes / (d.dtype == MACV_BF16 ? 2 : 4);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(
        abi::load_float(ab.arena() + d.offset, d.dtype, static_cast<int64_t>(i)));
  return v;
}

const char* dtype_text(int d) { return d == MACV_F32 ? "f32" : "bf16"; }

/*! Dataset `name` of a user's outputs file, read as T with `count` elements. Its HDF5 type
 *  must be T's (class and size): h5::read converts, so a float32 `hit` or an int32
 *  `match_pos` would otherwise be graded as if it were right. */
template <typename T>
std::vector<T> read_output(hid_t h, const char* name, int64_t count) {
  const h5::Dataset ds = h5::open_dataset(h, name);
  const bool fp = std::is_floating_point_v<T>;
  require(ds.type_class == (fp ? H5T_FLOAT : H5T_INTEGER) && ds.type_size == sizeof(T),
          h5::file_name(h), ": dataset '", name, "' is of ",
          ds.type_class == H5T_FLOAT     ? "float"
          : ds.type_class == H5T_INTEGER ? "integer"
                                         : "another",
          " type of ", ds.type_size, " bytes, expected ", fp ? "float" : "integer", " of ",
          sizeof(T), " bytes (docs/certify.md, the outputs schema)");
  return h5::read<T>(h, name, count);
}

/*! Opens a file of the protocol, requiring its schema and version. */
h5::Handle open_checked(const std::string& path, const char* schema) {
  h5::Handle file = h5::open_file(path);
  const hid_t f = file.get();
  require(h5::attr_string(f, sch::kSchema) == schema, path, ": schema is not ", schema);
  const int64_t v = h5::attr_int64(f, sch::kVersion);
  require(v == sch::verify::kFilesVersion, path, ": version ", v, " is not ",
          sch::verify::kFilesVersion);
  return file;
}

}  // namespace

std::string case_file(int id) {
  char b[32];
  std::snprintf(b, sizeof b, "case-%05d.h5", id);
  return b;
}

abi::Choices export_choices(const macv_caps& caps) {
  abi::Choices ch;
  ch.kv_layout = (caps.kv_layouts & MACV_KV_NHD) ? MACV_KV_NHD : MACV_KV_HND;
  ch.ring_layout = MACV_RING_HEAD_MAJOR;
  ch.ring_o_dtype = caps.ring_o_dtype;
  ch.out_dtype = caps.out_dtype;
  ch.lse_base2 = caps.lse_base2 != 0;
  ch.padded_io = false;
  ch.plugin_prefill = false;
  ch.full_attention = false;
  ch.reports_keys_read = caps.reports_keys_read != 0;
  ch.writes_ring = caps.writes_ring != 0;
  ch.decisions = caps.decisions;
  return ch;
}

int export_cases(const std::string& dir, const std::vector<CaseSpec>& cases, const macv_caps& caps,
                 uint64_t nonce, const std::string& matrix_fnv1a, const std::string& driver,
                 const std::string& command) {
  fs::create_directories(fs::path(dir) / fk::kInputsDir);
  std::vector<int64_t> ids;
  std::vector<int8_t> applicable;
  std::vector<std::string> lines, reasons;
  int exported = 0;
  for (const auto& c : cases) {
    // The files carry no chain depths, no policy parameters (semantics §3.3) and no gate
    // parameters or state (§3.5) yet; a plain decode kernel needs none of them (its exact
    // attention does not depend on them).
    const bool mac = caps.decisions != MACV_DECISIONS_EXACT;
    const std::string why =
        c.has_policy() && mac
            ? std::string("policy cases (K, N) are not carried by the file protocol")
        : c.has_gate() && mac
            ? std::string(
                  "gate cases (W > 0) are not carried by the file protocol: it has no "
                  "gate parameters or gate state")
            : abi::not_applicable(caps, c);
    ids.push_back(c.id);
    lines.push_back(c.to_line());
    applicable.push_back(why.empty() ? 1 : 0);
    reasons.push_back(why);
    if (!why.empty()) continue;
    const CaseInputs in = make_inputs(with_nonce(c, nonce));
    AbiCase ab(in, export_choices(caps));
    std::vector<uint8_t> arena(ab.layout().arena_bytes);
    ab.attach(arena.data());
    ab.begin();
    const auto& p = ab.layout().params;
    const int64_t S = c.steps, B = c.batch, Hq = c.Hq(), D = c.D, M = c.M;
    const bool ring = ab.choices().has_ring();  // absent tensors copy as empty vectors
    const auto ring_q = copy_tensor<uint16_t>(ab, abi::kRingQ);
    const auto ring_lse = copy_tensor<float>(ab, abi::kRingLse);
    const auto ring_pos = copy_tensor<int64_t>(ab, abi::kRingPos);
    const auto ring_o16 = caps.ring_o_dtype == MACV_BF16 ? copy_tensor<uint16_t>(ab, abi::kRingO)
                                                         : std::vector<uint16_t>{};
    const auto ring_o32 =
        caps.ring_o_dtype == MACV_F32 ? copy_tensor<float>(ab, abi::kRingO) : std::vector<float>{};
    std::vector<uint16_t> q, qt;
    std::vector<int64_t> pos;
    for (int64_t s = 0; s < S; ++s) {
      ab.before_step(s);
      const auto a = copy_tensor<uint16_t>(ab, abi::kQ),
                 b = copy_tensor<uint16_t>(ab, abi::kQTilde);
      const auto m = copy_tensor<int64_t>(ab, abi::kPosition);
      q.insert(q.end(), a.begin(), a.end());
      qt.insert(qt.end(), b.begin(), b.end());
      pos.insert(pos.end(), m.begin(), m.end());
    }
    std::vector<int64_t> prompt;
    std::vector<uint8_t> ready;
    for (const auto& rq : in.requests) {
      prompt.push_back(rq.prompt);
      ready.push_back(rq.ready ? 1 : 0);
    }
    const auto& kd = ab.layout().t[abi::kKCache];
    const std::vector<hsize_t> kv_dims(kd.shape, kd.shape + 4);
    io::write_h5_atomically(
        (fs::path(dir) / fk::kInputsDir / case_file(c.id)).string(), [&](hid_t f) {
          h5::write_attr(f, sch::kSchema, sch::verify::kInputsName);
          h5::write_attr(f, sch::kVersion, sch::verify::kFilesVersion);
          h5::write_attr(f, vs::kCaseId, int64_t{c.id});
          h5::write_attr(f, vs::kCaseLine, c.to_line());
          h5::write_attr(f, fk::kFamily, c.family);
          h5::write_attr(f, vs::kNonce, nonce_text(nonce));
          h5::write_attr(f, fk::kHeadDim, D);
          h5::write_attr(f, fk::kNumQHeads, Hq);
          h5::write_attr(f, fk::kNumKvHeads, int64_t{c.Hkv});
          h5::write_attr(f, fk::kBatch, B);
          h5::write_attr(f, fk::kSteps, S);
          h5::write_attr(f, fk::kPageSize, int64_t{c.ps});
          h5::write_attr(f, fk::kKvLayout, p.kv_layout == MACV_KV_NHD ? "NHD" : "HND");
          h5::write_attr(f, fk::kNumPages, int64_t{p.num_pages});
          h5::write_attr(f, fk::kMaxPagesPerRequest, int64_t{p.max_pages_per_request});
          h5::write_attr(f, fk::kRing, M);
          h5::write_attr(f, fk::kTail, c.r);
          h5::write_attr(f, fk::kSinks, c.F);
          h5::write_attr(f, fk::kGenMin, c.gen_min);
          h5::write_attr(f, fk::kTau, c.tau);
          h5::write_attr(f, fk::kThreshold, static_cast<double>(p.threshold));
          h5::write_attr(f, fk::kSoftmaxScale, p.softmax_scale);
          h5::write_attr(f, fk::kMaxContext, p.max_context);
          h5::write_attr(f, fk::kOutDtype, dtype_text(caps.out_dtype));
          h5::write_attr(f, fk::kRingODtype, dtype_text(caps.ring_o_dtype));
          h5::write_attr(f, fk::kLseBase2, int64_t{caps.lse_base2});
          h5::write_attr(f, fk::kReportsKeysRead, int64_t{caps.reports_keys_read});
          h5::write_attr(f, fk::kWritesRing, int64_t{caps.writes_ring});
          h5::write_attr(f, fk::kDecisions, int64_t{caps.decisions});
          h5::write(f, fk::kKCache, kv_dims, copy_tensor<uint16_t>(ab, abi::kKCache));
          h5::write(f, fk::kVCache, kv_dims, copy_tensor<uint16_t>(ab, abi::kVCache));
          h5::write(f, fk::kPageTable, dims({B, p.max_pages_per_request}),
                    copy_tensor<int32_t>(ab, abi::kPageTable));
          h5::write(f, fk::kPrompt, prompt);
          h5::write(f, fk::kReady, ready);
          h5::write(f, fk::kPosition, dims({S, B}), pos);
          h5::write(f, fk::kQ, dims({S, B, Hq, D}), q);
          h5::write(f, fk::kQTilde, dims({S, B, Hq, D}), qt);
          if (!ring) return;  // a plain decode kernel: no ring datasets
          h5::write(f, fk::kRingQ, dims({B, Hq, M, D}), ring_q);
          if (caps.ring_o_dtype == MACV_BF16)
            h5::write(f, fk::kRingO, dims({B, Hq, M, D}), ring_o16);
          else
            h5::write(f, fk::kRingO, dims({B, Hq, M, D}), ring_o32);
          h5::write(f, fk::kRingLse, dims({B, Hq, M}), ring_lse);
          h5::write(f, fk::kRingPos, dims({B, Hq, M}), ring_pos);
        });
    ++exported;
  }
  io::write_h5_atomically((fs::path(dir) / fk::kManifest).string(), [&](hid_t f) {
    h5::write_attr(f, sch::kSchema, sch::verify::kExportName);
    h5::write_attr(f, sch::kVersion, sch::verify::kFilesVersion);
    h5::write_attr(f, vs::kNonce, nonce_text(nonce));
    h5::write_attr(f, vs::kMatrixFnv1a, matrix_fnv1a);
    h5::write_attr(f, sch::kGitCommit, driver);
    h5::write_attr(f, fk::kCaps, abi::caps_to_text(caps));
    h5::write_attr(f, vs::kCommand, command);
    h5::write(f, vs::kCaseId, ids);
    h5::write(f, fk::kApplicable, applicable);
    h5::write_strings(f, fk::kLine, lines, h5::Str::kVariable);
    h5::write_strings(f, fk::kReason, reasons, h5::Str::kVariable);
  });
  return exported;
}

GradeSet read_grade_set(const std::string& dir, const std::string& outputs_dir) {
  GradeSet g;
  const std::string manifest = (fs::path(dir) / fk::kManifest).string();
  const h5::Handle file = open_checked(manifest, sch::verify::kExportName);
  const hid_t f = file.get();
  g.nonce = std::strtoull(h5::attr_string(f, vs::kNonce).c_str(), nullptr, 0);
  g.matrix_fnv1a = h5::attr_string(f, vs::kMatrixFnv1a);
  g.caps = abi::caps_from_text(h5::attr_string(f, fk::kCaps));
  const auto ids = h5::read<int64_t>(f, vs::kCaseId);
  const auto applicable = h5::read<int8_t>(f, fk::kApplicable, static_cast<int64_t>(ids.size()));
  const auto lines = h5::read_strings(f, fk::kLine);
  const auto reasons = h5::read_strings(f, fk::kReason);
  require(lines.size() == ids.size() && reasons.size() == ids.size(), manifest,
          ": case_id, line and reason differ in length");
  g.outputs_dir = outputs_dir.empty() ? (fs::path(dir) / fk::kOutputsDir).string() : outputs_dir;
  Sha256 set;
  for (size_t i = 0; i < ids.size(); ++i) {
    CaseSpec c = parse_case(lines[i]);
    require(c.id == ids[i], manifest, ": case_id ", ids[i], " and its line disagree");
    g.cases.push_back(c);
    if (!applicable[i]) {
      g.not_applicable[c.id] = reasons[i];
      continue;
    }
    const std::string out = (fs::path(g.outputs_dir) / case_file(c.id)).string();
    if (!fs::exists(out)) continue;
    // The identity of the graded set: every output file's name and SHA-256, in case order.
    const std::string line = case_file(c.id) + " " + sha256_file(out) + "\n";
    set.update(line.data(), line.size());
    const h5::Handle o = h5::open_file(out);
    const std::string name = h5::attr_string(o.get(), fk::kDeclaredName),
                      version = h5::attr_string(o.get(), fk::kDeclaredVersion);
    if (g.outputs_found == 0) {
      g.declared_name = name;
      g.declared_version = version;
    }
    require(name == g.declared_name && version == g.declared_version, out, ": declares '", name,
            "' version '", version, "', other outputs declare '", g.declared_name, "' version '",
            g.declared_version, "'");
    ++g.outputs_found;
  }
  g.outputs_sha256 = set.hex();
  return g;
}

namespace {

/*! A case's results read from the user's output file, fed through the ABI core. */
class FileImpl final : public Implementation {
 public:
  FileImpl(GradeSet set, std::string dir) : set_(std::move(set)), dir_(std::move(dir)) {}
  std::string name() const override {
    return set_.declared_name.empty() ? std::string("file-protocol") : set_.declared_name;
  }
  std::string device() const override { return "file protocol (" + set_.outputs_dir + ")"; }
  bool supports(const CaseSpec& c, std::string* why) const override {
    const auto it = set_.not_applicable.find(c.id);
    if (it == set_.not_applicable.end()) return true;
    *why = it->second;
    return false;
  }

  void begin(const CaseInputs& in) override {
    problem_.clear();
    loaded_ = false;
    const auto& c = in.spec;
    const std::string ipath = (fs::path(dir_) / fk::kInputsDir / case_file(c.id)).string();
    const std::string opath = (fs::path(set_.outputs_dir) / case_file(c.id)).string();
    if (!fs::exists(opath))
      throw std::runtime_error(msg("no outputs for case ", c.id, " (", opath, ")"));
    ab_ = std::make_unique<AbiCase>(in, export_choices(set_.caps));
    ring_ = ab_->choices().has_ring();
    arena_.assign(ab_->layout().arena_bytes, 0);
    ab_->attach(arena_.data());
    ab_->begin(false);
    const int64_t S = c.steps, B = c.batch, Hq = c.Hq(), D = c.D, M = c.M;
    const int ring_dtype = set_.caps.ring_o_dtype;
    {
      // The initial ring as exported; the queries, to check the file holds this case's inputs.
      const h5::Handle f = open_checked(ipath, sch::verify::kInputsName);
      const hid_t h = f.get();
      if (ring_) {
        load_tensor(*ab_, abi::kRingQ, h5::read<uint16_t>(h, fk::kRingQ, B * Hq * M * D));
        if (ring_dtype == MACV_BF16)
          load_tensor(*ab_, abi::kRingO, h5::read<uint16_t>(h, fk::kRingO, B * Hq * M * D));
        else
          load_tensor(*ab_, abi::kRingO, h5::read<float>(h, fk::kRingO, B * Hq * M * D));
        load_tensor(*ab_, abi::kRingLse, h5::read<float>(h, fk::kRingLse, B * Hq * M));
        load_tensor(*ab_, abi::kRingPos, h5::read<int64_t>(h, fk::kRingPos, B * Hq * M));
      }
      q_ = h5::read<uint16_t>(h, fk::kQ, S * B * Hq * D);
      qt_ = h5::read<uint16_t>(h, fk::kQTilde, S * B * Hq * D);
      // The cache as this case lays it out (every token of every step): a dataset of another
      // size (an edited or truncated export) is refused here, before it is compared.
      const int64_t kv = static_cast<int64_t>(ab_->layout().t[abi::kKCache].bytes / 2);
      k_ = h5::read<uint16_t>(h, fk::kKCache, kv);
      v_ = h5::read<uint16_t>(h, fk::kVCache, kv);
    }
    const h5::Handle f = open_checked(opath, sch::verify::kOutputsName);
    const hid_t h = f.get();
    require(h5::attr_int64(h, vs::kCaseId) == c.id, opath, ": case_id ",
            h5::attr_int64(h, vs::kCaseId), " is not ", c.id);
    require(h5::attr_string(h, vs::kNonce) == nonce_text(set_.nonce), opath, ": nonce ",
            h5::attr_string(h, vs::kNonce), " is not the export's ", nonce_text(set_.nonce),
            " (outputs of another export?)");
    o_ = read_output<float>(h, fk::kO, S * B * Hq * D);
    lse_ = read_output<float>(h, fk::kLse, S * B * Hq);
    hit_.clear();
    mpos_.clear();
    if (set_.caps.decisions == MACV_DECISIONS_REPORTED) {
      hit_ = read_output<uint8_t>(h, fk::kHit, S * B * Hq);
      mpos_ = read_output<int64_t>(h, fk::kMatchPos, S * B * Hq);
    }
    keys_.clear();
    slot_q_.clear();
    slot_o_.clear();
    slot_lse_.clear();
    slot_pos_.clear();
    if (set_.caps.reports_keys_read) keys_ = read_output<int64_t>(h, fk::kKeysRead, S * B * Hq);
    if (set_.caps.writes_ring) {
      slot_q_ = read_output<uint16_t>(h, fk::kSlotQ, S * B * Hq * D);
      slot_o_ = read_output<float>(h, fk::kSlotO, S * B * Hq * D);
      slot_lse_ = read_output<float>(h, fk::kSlotLse, S * B * Hq);
      slot_pos_ = read_output<int64_t>(h, fk::kSlotPos, S * B * Hq);
    }
    if (ring_) {
      fin_q_ = read_output<uint16_t>(h, fk::kRingQ, B * Hq * M * D);
      fin_o_ = read_output<float>(h, fk::kRingO, B * Hq * M * D);
      fin_lse_ = read_output<float>(h, fk::kRingLse, B * Hq * M);
      fin_pos_ = read_output<int64_t>(h, fk::kRingPos, B * Hq * M);
    }
    loaded_ = true;
  }

  void step(int64_t s, StepOutput* out) override {
    const auto& c = ab_->layout().params;
    const int64_t B = c.batch, Hq = c.num_q_heads, D = c.head_dim, M = c.ring;
    ab_->before_step(s);
    const size_t n = static_cast<size_t>(B * Hq * D), o0 = static_cast<size_t>(s) * n;
    if (std::memcmp(ab_->data<uint16_t>(abi::kQ), q_.data() + o0, n * 2) != 0 ||
        std::memcmp(ab_->data<uint16_t>(abi::kQTilde), qt_.data() + o0, n * 2) != 0)
      throw std::runtime_error(msg("step ", s,
                                   ": the exported queries are not this case's (an "
                                   "export of another driver version, or edited inputs)"));
    uint8_t* out_o = ab_->data<uint8_t>(abi::kOut);
    for (size_t i = 0; i < n; ++i)
      abi::store_float(out_o, set_.caps.out_dtype, static_cast<int64_t>(i), o_[o0 + i]);
    const size_t k = static_cast<size_t>(B * Hq), k0 = static_cast<size_t>(s) * k;
    std::memcpy(ab_->data<float>(abi::kLse), lse_.data() + k0, k * 4);
    if (!hit_.empty()) {
      std::memcpy(ab_->data<uint8_t>(abi::kHit), hit_.data() + k0, k);
      std::memcpy(ab_->data<int64_t>(abi::kMatchPos), mpos_.data() + k0, k * 8);
    }
    if (!keys_.empty()) std::memcpy(ab_->data<int64_t>(abi::kKeysRead), keys_.data() + k0, k * 8);
    if (!slot_pos_.empty())
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < Hq; ++h) {
          // Slot m mod M as the user's program reported it after the step.
          const int64_t j = ab_->position(static_cast<int>(b), s) % M;
          const size_t e = k0 + static_cast<size_t>(b * Hq + h);
          const int64_t ev = ab_->ring_offset(static_cast<int>(b), static_cast<int>(h), j, true);
          const int64_t es = ab_->ring_offset(static_cast<int>(b), static_cast<int>(h), j, false);
          std::memcpy(ab_->data<uint16_t>(abi::kRingQ) + ev, slot_q_.data() + e * D, D * 2);
          for (int64_t d = 0; d < D; ++d)
            abi::store_float(ab_->data<uint8_t>(abi::kRingO), set_.caps.ring_o_dtype, ev + d,
                             slot_o_[e * D + static_cast<size_t>(d)]);
          ab_->data<float>(abi::kRingLse)[es] = slot_lse_[e];
          ab_->data<int64_t>(abi::kRingPos)[es] = slot_pos_[e];
        }
    note(ab_->after_step(s, out));
  }

  std::string end() override {
    if (!loaded_) {
      // begin() threw (its message is the case's ERROR): nothing was loaded to compare.
      ab_.reset();
      problem_.clear();
      return {};
    }
    loaded_ = false;
    auto differs = [](const auto& a, const auto* b) {
      // memcmp with a null pointer is undefined even for 0 bytes (an empty vector's data()).
      return !a.empty() && std::memcmp(a.data(), b, a.size() * sizeof(a[0])) != 0;
    };
    if (ab_ && (differs(k_, ab_->data<uint16_t>(abi::kKCache)) ||
                differs(v_, ab_->data<uint16_t>(abi::kVCache)))) {
      // Inputs that are not the case's (an edited export, or one of another driver version)
      // leave nothing to grade: an ERROR, as for the queries, not a FAIL of the kernel.
      ab_.reset();
      problem_.clear();
      throw std::runtime_error(
          "the exported KV cache is not this case's (an export of another driver version, or "
          "edited inputs)");
    }
    if (ab_ && ring_ && problem_.empty()) {
      // The whole ring after the last step must be the initial ring with exactly the slot
      // writes the steps reported: nothing else was written.
      const auto& d = ab_->layout().t[abi::kRingO];
      const auto ring_o = as_f32(*ab_, abi::kRingO);
      if (differs(fin_q_, ab_->data<uint16_t>(abi::kRingQ)) ||
          differs(fin_lse_, ab_->data<float>(abi::kRingLse)) ||
          differs(fin_pos_, ab_->data<int64_t>(abi::kRingPos)))
        note(
            "the final ring differs from the initial ring with the reported slot writes: a "
            "slot other than m mod M of a ready request was written");
      for (size_t i = 0; i < ring_o.size() && problem_.empty(); ++i) {
        // Compared in the ring's dtype (a BF16 ring's values are BF16-exact in the file).
        std::vector<uint8_t> a(4), b(4);
        abi::store_float(a.data(), d.dtype, 0, fin_o_[i]);
        abi::store_float(b.data(), d.dtype, 0, ring_o[i]);
        if (a != b)
          note(msg("the final ring's o differs at element ", i,
                   " from the initial ring with the reported slot writes"));
      }
    }
    ab_.reset();
    std::string p;
    p.swap(problem_);
    return p;
  }

 private:
  void note(const std::string& p) {
    if (problem_.empty()) problem_ = p;
  }

  GradeSet set_;
  std::string dir_;
  std::unique_ptr<AbiCase> ab_;
  bool ring_ = true;     //!< the case has a ring (all but a plain decode kernel's)
  bool loaded_ = false;  //!< begin() read every file of the case
  std::vector<uint8_t> arena_;
  std::string problem_;
  std::vector<uint16_t> q_, qt_, k_, v_, slot_q_, fin_q_;
  std::vector<float> o_, lse_, slot_o_, slot_lse_, fin_o_, fin_lse_;
  std::vector<uint8_t> hit_;
  std::vector<int64_t> mpos_, keys_, slot_pos_, fin_pos_;
};

}  // namespace

std::unique_ptr<Implementation> make_file_impl(const GradeSet& set, const std::string& dir) {
  return std::make_unique<FileImpl>(set, dir);
}

}  // namespace mac::verify::files
