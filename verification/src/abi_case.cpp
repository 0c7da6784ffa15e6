// The ABI core: a case laid out as plugin_abi.h's tensors in a host arena, and back.
#include "mac/verify/abi_case.hpp"

#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/semantics.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace mac::verify::abi {
namespace {

constexpr uint16_t kBf16Nan = 0x7FC0;
constexpr uint8_t kHitPoison = 0xA5;
constexpr int64_t kIntPoison = -2;
constexpr uint64_t kAlign = 256;  // every tensor starts on a 256-byte boundary (device loads)
// The ring tensors a step may change only in slot m mod M (ring_depth: absent, 0 bytes,
// unless the implementation keeps chain depths).
constexpr int kRingTensors = 5;
constexpr int kRing[kRingTensors] = {kRingQ, kRingO, kRingLse, kRingPos, kRingDepth};

size_t elem_size(int dtype) {
  switch (dtype) {
    case MACV_F32:
    case MACV_I32: return 4;
    case MACV_BF16: return 2;
    case MACV_I64:
    case MACV_F64: return 8;
    case MACV_U8: return 1;
  }
  return 1;
}

const char* dtype_name(int d) {
  switch (d) {
    case MACV_F32: return "f32";
    case MACV_BF16: return "bf16";
    case MACV_I32: return "i32";
    case MACV_I64: return "i64";
    case MACV_U8: return "u8";
    case MACV_F64: return "f64";
  }
  return "?";
}

float f32_nan() { return std::numeric_limits<float>::quiet_NaN(); }

template <typename T>
bool contains(const T* list, int n, T v) {
  return n == 0 || std::find(list, list + n, v) != list + n;
}

template <typename T>
std::string list_text(const T* list, int n) {
  if (n == 0) return "any";
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(list[i]);
  return s;
}

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

double load_float(const uint8_t* p, int dtype, int64_t i) {
  if (dtype == MACV_BF16) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    return ref::bf16_from_bits(b);
  }
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}

void store_float(uint8_t* p, int dtype, int64_t i, double x) {
  if (dtype == MACV_BF16) {
    const uint16_t b = ref::bf16_bits(ref::round_bf16(static_cast<float>(x)));
    std::memcpy(p + 2 * i, &b, 2);
  } else {
    const float f = static_cast<float>(x);
    std::memcpy(p + 4 * i, &f, 4);
  }
}

const char* tensor_name(int t) {
  static const char* const names[kNumTensors] = {"q",
                                                 "q_tilde",
                                                 "k_cache",
                                                 "v_cache",
                                                 "page_table",
                                                 "position",
                                                 "ready",
                                                 "ring_q",
                                                 "ring_o",
                                                 "ring_lse",
                                                 "ring_pos",
                                                 "o",
                                                 "lse",
                                                 "hit",
                                                 "match_pos",
                                                 "keys_read",
                                                 "full_o",
                                                 "full_lse",
                                                 "prefill_q",
                                                 "prefill_q_tilde",
                                                 "prefill_first_pos",
                                                 "prefill_count",
                                                 "ring_depth",
                                                 "gate_state"};
  return t >= 0 && t < kNumTensors ? names[t] : "?";
}

uint64_t hash_bytes(const void* data, size_t bytes) {
  // Four independent multiply-rotate lanes over 8-byte words (several GB/s), then a mix of
  // the lanes, the tail and the length.
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t a = P1, b = P2, c = P1 ^ P2, d = ~P1;
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a = rotl(a ^ (w[0] * P2), 31) * P1;
    b = rotl(b ^ (w[1] * P2), 31) * P1;
    c = rotl(c ^ (w[2] * P2), 31) * P1;
    d = rotl(d ^ (w[3] * P2), 31) * P1;
  }
  uint64_t h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18) + bytes;
  for (; i < bytes; ++i) h = rotl(h ^ (p[i] * P1), 11) * P2;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  return h;
}

// ---------------------------------------------------------------------------------------
// Capabilities
// ---------------------------------------------------------------------------------------

std::string validate_caps(const macv_caps& c) {
  if (c.device != MACV_DEVICE_CPU && c.device != MACV_DEVICE_CUDA)
    return msg("device = ", c.device, " is neither MACV_DEVICE_CPU (1) nor MACV_DEVICE_CUDA (2)");
  if (c.num_head_dims < 0 || c.num_head_dims > 8)
    return msg("num_head_dims = ", c.num_head_dims, " outside 0..8");
  if (c.num_gqa_ratios < 0 || c.num_gqa_ratios > 16)
    return msg("num_gqa_ratios = ", c.num_gqa_ratios, " outside 0..16");
  if (c.num_page_sizes < 0 || c.num_page_sizes > 8)
    return msg("num_page_sizes = ", c.num_page_sizes, " outside 0..8");
  if (c.num_variants < 0 || c.num_variants > 4)
    return msg("num_variants = ", c.num_variants, " outside 0..4");
  if ((c.kv_layouts & (MACV_KV_NHD | MACV_KV_HND)) == 0)
    return msg("kv_layouts = ", c.kv_layouts, " names neither MACV_KV_NHD nor MACV_KV_HND");
  if (c.decisions < MACV_DECISIONS_REPORTED || c.decisions > MACV_DECISIONS_EXACT)
    return msg("decisions = ", c.decisions,
               " is not MACV_DECISIONS_REPORTED (0), _UNREPORTED (1) or _EXACT (2)");
  // A plain decode kernel has no ring: nothing it could write, prefill or cap.
  const bool plain = c.decisions == MACV_DECISIONS_EXACT;
  if (plain) {
    for (const auto& [value, name] : {std::pair<int32_t, const char*>{c.writes_ring, "writes_ring"},
                                      {c.prefills, "prefills"},
                                      {c.full_attention, "full_attention"},
                                      {c.policies, "policies"}})
      if (value != 0)
        return msg("decisions = 2 (a plain decode kernel, no ring) with ", name, " = ", value,
                   " (must be 0)");
  } else if ((c.ring_layouts & (MACV_RING_HEAD_MAJOR | MACV_RING_SLOT_MAJOR)) == 0) {
    return msg("ring_layouts = ", c.ring_layouts,
               " names neither MACV_RING_HEAD_MAJOR nor MACV_RING_SLOT_MAJOR");
  }
  for (int d : {c.out_dtype, c.ring_o_dtype})
    if (d != MACV_F32 && d != MACV_BF16)
      return msg("out_dtype/ring_o_dtype = ", d, " is neither MACV_F32 (0) nor MACV_BF16 (1)");
  if (c.tight_tolerances && (c.out_dtype != MACV_F32 || (!plain && c.ring_o_dtype != MACV_F32)))
    return "tight_tolerances needs out_dtype and ring_o_dtype MACV_F32 (BF16 rounding alone "
           "exceeds the FP32 limits)";
  if (c.name[0] == 0) return "name is empty";
  return {};
}

std::string not_applicable(const macv_caps& c, const CaseSpec& s) {
  if (!contains(c.head_dims, c.num_head_dims, s.D))
    return msg("head dim ", s.D, " not among the declared ",
               list_text(c.head_dims, c.num_head_dims));
  if (!contains(c.gqa_ratios, c.num_gqa_ratios, s.G))
    return msg("GQA ratio ", s.G, " not among the declared ",
               list_text(c.gqa_ratios, c.num_gqa_ratios));
  if (!contains(c.page_sizes, c.num_page_sizes, s.ps))
    return msg("page size ", s.ps, " not among the declared ",
               list_text(c.page_sizes, c.num_page_sizes));
  // A plain decode kernel's exact attention does not depend on the MAC parameters.
  if (c.decisions == MACV_DECISIONS_EXACT) {
    if (c.max_context > 0 && s.max_kv_len() > c.max_context)
      return msg("kv_len ", s.max_kv_len(), " above the declared max_context ", c.max_context);
    if (c.max_batch > 0 && s.batch > c.max_batch)
      return msg("batch ", s.batch, " above the declared max_batch ", c.max_batch);
    return {};
  }
  if (s.F > 0 && !c.sinks) return msg("sinks F = ", s.F, " but no sinks declared");
  if (c.max_context > 0 && s.max_kv_len() > c.max_context)
    return msg("kv_len ", s.max_kv_len(), " above the declared max_context ", c.max_context);
  if (c.ring_min > 0 && s.M < c.ring_min)
    return msg("ring M = ", s.M, " below the declared ring_min ", c.ring_min);
  if (c.ring_max > 0 && s.M > c.ring_max)
    return msg("ring M = ", s.M, " above the declared ring_max ", c.ring_max);
  if (c.max_batch > 0 && s.batch > c.max_batch)
    return msg("batch ", s.batch, " above the declared max_batch ", c.max_batch);
  if (s.K >= 0 && !(c.policies & MACV_POLICY_DEPTH_CAP))
    return msg("depth cap K = ", s.K, " but the depth-cap policy is not declared");
  if (s.N > 0 && !(c.policies & MACV_POLICY_REFRESH))
    return msg("refresh N = ", s.N, " but the refresh policy is not declared");
  if (s.W > 0 && !(c.policies & MACV_POLICY_GATE))
    return msg("gate window W = ", s.W, " but the gate policy (MACV_POLICY_GATE) is not declared");
  return {};
}

Choices choose(const macv_caps& c, const CaseSpec& s) {
  Choices ch;
  const bool both_kv = (c.kv_layouts & MACV_KV_NHD) && (c.kv_layouts & MACV_KV_HND);
  ch.kv_layout = both_kv ? (s.id % 2 == 0 ? MACV_KV_NHD : MACV_KV_HND)
                         : ((c.kv_layouts & MACV_KV_NHD) ? MACV_KV_NHD : MACV_KV_HND);
  const bool both_ring =
      (c.ring_layouts & MACV_RING_HEAD_MAJOR) && (c.ring_layouts & MACV_RING_SLOT_MAJOR);
  ch.ring_layout = both_ring ? ((s.id / 2) % 2 == 0 ? MACV_RING_HEAD_MAJOR : MACV_RING_SLOT_MAJOR)
                             : ((c.ring_layouts & MACV_RING_HEAD_MAJOR) ? MACV_RING_HEAD_MAJOR
                                                                        : MACV_RING_SLOT_MAJOR);
  ch.ring_o_dtype = c.ring_o_dtype;
  ch.out_dtype = c.out_dtype;
  ch.lse_base2 = c.lse_base2 != 0;
  ch.padded_io = c.strided_io && (s.id / 4) % 2 == 1;
  ch.plugin_prefill = c.prefills != 0;
  ch.full_attention = c.full_attention != 0;
  ch.reports_keys_read = c.reports_keys_read != 0;
  ch.writes_ring = c.writes_ring != 0;
  ch.ring_depth = (c.policies & MACV_POLICY_DEPTH_CAP) != 0;
  ch.gate = (c.policies & MACV_POLICY_GATE) != 0 && s.has_gate();
  ch.decisions = c.decisions;
  ch.variant = 0;
  if (c.num_variants > 1) {
    ch.variant = s.id % c.num_variants;
    for (int v = 0; v < c.num_variants; ++v)
      if (s.k3 == std::string(c.variants[v], strnlen(c.variants[v], sizeof c.variants[v])))
        ch.variant = v;
  }
  return ch;
}

Tolerances tolerances(const macv_caps& c) {
  return c.tight_tolerances ? Tolerances::cpu() : Tolerances::gpu();
}

StateStorage expected_storage(const macv_caps& c) {
  return c.ring_o_dtype == MACV_BF16 ? StateStorage::kProduction : StateStorage::kFull;
}

Grading grading(const macv_caps& c) {
  switch (c.decisions) {
    case MACV_DECISIONS_UNREPORTED: return Grading::kMacValues;
    case MACV_DECISIONS_EXACT: return Grading::kExact;
  }
  return Grading::kMac;
}

namespace {

// One table of the text form's keys, for both directions.
enum class Kind { kText, kInt, kInt64, kList, kDtype, kKvLayouts, kRingLayouts, kVariants };
struct Key {
  const char* name;
  Kind kind;
  size_t offset;  // into macv_caps
  size_t count_offset = 0, capacity = 0;
};
const std::vector<Key>& keys() {
#define MACV_OFF(f) offsetof(macv_caps, f)
  static const std::vector<Key> k = {
      {"name", Kind::kText, MACV_OFF(name), 0, sizeof(macv_caps::name)},
      {"version", Kind::kText, MACV_OFF(version), 0, sizeof(macv_caps::version)},
      {"device", Kind::kInt, MACV_OFF(device)},
      {"head_dims", Kind::kList, MACV_OFF(head_dims), MACV_OFF(num_head_dims), 8},
      {"gqa_ratios", Kind::kList, MACV_OFF(gqa_ratios), MACV_OFF(num_gqa_ratios), 16},
      {"page_sizes", Kind::kList, MACV_OFF(page_sizes), MACV_OFF(num_page_sizes), 8},
      {"kv_layouts", Kind::kKvLayouts, MACV_OFF(kv_layouts)},
      {"ring_layouts", Kind::kRingLayouts, MACV_OFF(ring_layouts)},
      {"sinks", Kind::kInt, MACV_OFF(sinks)},
      {"max_context", Kind::kInt64, MACV_OFF(max_context)},
      {"ring_min", Kind::kInt64, MACV_OFF(ring_min)},
      {"ring_max", Kind::kInt64, MACV_OFF(ring_max)},
      {"max_batch", Kind::kInt, MACV_OFF(max_batch)},
      {"out_dtype", Kind::kDtype, MACV_OFF(out_dtype)},
      {"ring_o_dtype", Kind::kDtype, MACV_OFF(ring_o_dtype)},
      {"lse_base2", Kind::kInt, MACV_OFF(lse_base2)},
      {"strided_io", Kind::kInt, MACV_OFF(strided_io)},
      {"reports_keys_read", Kind::kInt, MACV_OFF(reports_keys_read)},
      {"writes_ring", Kind::kInt, MACV_OFF(writes_ring)},
      {"graph_capturable", Kind::kInt, MACV_OFF(graph_capturable)},
      {"prefills", Kind::kInt, MACV_OFF(prefills)},
      {"full_attention", Kind::kInt, MACV_OFF(full_attention)},
      {"checks", Kind::kInt, MACV_OFF(checks)},
      {"tight_tolerances", Kind::kInt, MACV_OFF(tight_tolerances)},
      {"policies", Kind::kInt, MACV_OFF(policies)},
      {"decisions", Kind::kInt, MACV_OFF(decisions)},
      {"variants", Kind::kVariants, MACV_OFF(variants), MACV_OFF(num_variants), 4}};
#undef MACV_OFF
  return k;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!trim(t).empty()) out.push_back(trim(t));
  return out;
}

int64_t parse_int(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  require(!v.empty() && *end == 0, "caps: ", key, " = '", v, "' is not an integer");
  return x;
}

}  // namespace

std::string caps_to_text(const macv_caps& c) {
  std::ostringstream os;
  const auto* base = reinterpret_cast<const uint8_t*>(&c);
  for (const auto& k : keys()) {
    os << k.name << " = ";
    const uint8_t* p = base + k.offset;
    switch (k.kind) {
      case Kind::kText:
        os << std::string(reinterpret_cast<const char*>(p),
                          strnlen(reinterpret_cast<const char*>(p), k.capacity));
        break;
      case Kind::kInt: os << *reinterpret_cast<const int32_t*>(p); break;
      case Kind::kInt64: os << *reinterpret_cast<const int64_t*>(p); break;
      case Kind::kList:
        os << list_text(reinterpret_cast<const int32_t*>(p),
                        *reinterpret_cast<const int32_t*>(base + k.count_offset));
        break;
      case Kind::kDtype: os << dtype_name(*reinterpret_cast<const int32_t*>(p)); break;
      case Kind::kKvLayouts: {
        const int32_t m = *reinterpret_cast<const int32_t*>(p);
        os << ((m & MACV_KV_NHD) ? "nhd" : "")
           << ((m & MACV_KV_NHD) && (m & MACV_KV_HND) ? "," : "")
           << ((m & MACV_KV_HND) ? "hnd" : "");
        break;
      }
      case Kind::kRingLayouts: {
        const int32_t m = *reinterpret_cast<const int32_t*>(p);
        os << ((m & MACV_RING_HEAD_MAJOR) ? "head" : "")
           << ((m & MACV_RING_HEAD_MAJOR) && (m & MACV_RING_SLOT_MAJOR) ? "," : "")
           << ((m & MACV_RING_SLOT_MAJOR) ? "slot" : "");
        break;
      }
      case Kind::kVariants:
        for (int v = 0; v < c.num_variants; ++v)
          os << (v ? "," : "") << std::string(c.variants[v], strnlen(c.variants[v], 16));
        break;
    }
    os << "\n";
  }
  return os.str();
}

macv_caps caps_from_text(const std::string& text) {
  macv_caps c{};
  c.struct_size = sizeof c;
  c.device = MACV_DEVICE_CPU;
  c.kv_layouts = MACV_KV_NHD;
  c.ring_layouts = MACV_RING_HEAD_MAJOR;
  c.out_dtype = MACV_BF16;
  c.ring_o_dtype = MACV_BF16;
  c.sinks = 1;
  c.writes_ring = 1;
  auto* base = reinterpret_cast<uint8_t*>(&c);
  std::stringstream ss(text);
  int lineno = 0;
  for (std::string line; std::getline(ss, line);) {
    ++lineno;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    require(eq != std::string::npos, "caps line ", lineno, ": '", line, "' is not key = value");
    const std::string key = trim(line.substr(0, eq)), v = trim(line.substr(eq + 1));
    const auto it =
        std::find_if(keys().begin(), keys().end(), [&](const Key& k) { return key == k.name; });
    require(it != keys().end(), "caps line ", lineno, ": unknown key '", key, "'");
    uint8_t* p = base + it->offset;
    switch (it->kind) {
      case Kind::kText:
        require(v.size() < it->capacity, "caps: ", key, " '", v, "' is longer than ",
                it->capacity - 1, " characters");
        std::memcpy(p, v.c_str(), v.size() + 1);
        break;
      case Kind::kInt:
        *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(parse_int(key, v));
        break;
      case Kind::kInt64: *reinterpret_cast<int64_t*>(p) = parse_int(key, v); break;
      case Kind::kList: {
        const auto items = v == "any" ? std::vector<std::string>{} : split(v);
        require(items.size() <= it->capacity, "caps: ", key, " lists ", items.size(),
                " values, at most ", it->capacity);
        for (size_t i = 0; i < items.size(); ++i)
          reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(parse_int(key, items[i]));
        *reinterpret_cast<int32_t*>(base + it->count_offset) = static_cast<int32_t>(items.size());
        break;
      }
      case Kind::kDtype:
        require(v == "f32" || v == "bf16", "caps: ", key, " = '", v, "' is neither f32 nor bf16");
        *reinterpret_cast<int32_t*>(p) = v == "f32" ? MACV_F32 : MACV_BF16;
        break;
      case Kind::kKvLayouts:
      case Kind::kRingLayouts: {
        const bool kv = it->kind == Kind::kKvLayouts;
        int32_t m = 0;
        for (const auto& item : split(v)) {
          if (item == (kv ? "nhd" : "head"))
            m |= 1;
          else if (item == (kv ? "hnd" : "slot"))
            m |= 2;
          else
            throw InputError(msg("caps: ", key, " item '", item, "' is not ",
                                 kv ? "nhd or hnd" : "head or slot"));
        }
        *reinterpret_cast<int32_t*>(p) = m;
        break;
      }
      case Kind::kVariants: {
        const auto items = split(v);
        require(items.size() <= 4, "caps: variants lists ", items.size(), " names, at most 4");
        for (size_t i = 0; i < items.size(); ++i) {
          require(items[i].size() < 16, "caps: variant '", items[i], "' is longer than 15");
          std::memcpy(c.variants[i], items[i].c_str(), items[i].size() + 1);
        }
        c.num_variants = static_cast<int32_t>(items.size());
        break;
      }
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// ABI structs over an arena
// ---------------------------------------------------------------------------------------

macv_tensor tensor(const CaseLayout& lay, int t, void* base, int device, int device_id) {
  const TensorDesc& d = lay.t[t];
  macv_tensor x{};
  x.data = d.present ? static_cast<uint8_t*>(base) + d.offset : nullptr;
  x.dtype = d.dtype;
  x.ndim = d.ndim;
  x.shape = d.shape;
  x.strides = d.strides;
  x.device = device;
  x.device_id = device_id;
  return x;
}

namespace {
/*! The tensors a step and a prefill share: KV cache, page table, ring. */
template <typename In>
void cache_and_ring(In& in, const CaseLayout& lay, void* base, int dev, int id) {
  in.k_cache = tensor(lay, kKCache, base, dev, id);
  in.v_cache = tensor(lay, kVCache, base, dev, id);
  in.page_table = tensor(lay, kPageTable, base, dev, id);
  in.ring_q = tensor(lay, kRingQ, base, dev, id);
  in.ring_o = tensor(lay, kRingO, base, dev, id);
  in.ring_lse = tensor(lay, kRingLse, base, dev, id);
  in.ring_pos = tensor(lay, kRingPos, base, dev, id);
  in.ring_depth = tensor(lay, kRingDepth, base, dev, id);
}
}  // namespace

macv_step_inputs step_inputs(const CaseLayout& lay, void* base, int dev, int id) {
  macv_step_inputs in{};
  in.q = tensor(lay, kQ, base, dev, id);
  in.q_tilde = tensor(lay, kQTilde, base, dev, id);
  in.position = tensor(lay, kPosition, base, dev, id);
  in.ready = tensor(lay, kReady, base, dev, id);
  cache_and_ring(in, lay, base, dev, id);
  in.gate_state = tensor(lay, kGateState, base, dev, id);
  return in;
}

macv_step_outputs step_outputs(const CaseLayout& lay, void* base, int dev, int id, bool full) {
  macv_step_outputs out{};
  out.o = tensor(lay, full ? kFullOut : kOut, base, dev, id);
  out.lse = tensor(lay, full ? kFullLse : kLse, base, dev, id);
  if (!full) {
    out.hit = tensor(lay, kHit, base, dev, id);
    out.match_pos = tensor(lay, kMatchPos, base, dev, id);
    out.keys_read = tensor(lay, kKeysRead, base, dev, id);
  }
  return out;
}

macv_prefill_inputs prefill_inputs(const CaseLayout& lay, void* base, int dev, int id) {
  macv_prefill_inputs in{};
  in.q = tensor(lay, kPrefQ, base, dev, id);
  in.q_tilde = tensor(lay, kPrefQTilde, base, dev, id);
  in.first_pos = tensor(lay, kPrefFirst, base, dev, id);
  in.count = tensor(lay, kPrefCount, base, dev, id);
  cache_and_ring(in, lay, base, dev, id);
  return in;
}

// ---------------------------------------------------------------------------------------
// AbiCase
// ---------------------------------------------------------------------------------------

void AbiCase::add_tensor(int t, int dtype, std::vector<int64_t> shape,
                         std::vector<int64_t> strides) {
  TensorDesc& d = layout_.t[t];
  d.present = 1;
  d.dtype = dtype;
  d.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    d.shape[i] = shape[i];
    d.strides[i] = strides[i];
  }
  // The outermost dimension times its stride covers every element and all padding.
  d.bytes = static_cast<uint64_t>(shape[0] * strides[0]) * elem_size(dtype);
  d.offset = layout_.arena_bytes;
  layout_.arena_bytes += (d.bytes + kAlign - 1) / kAlign * kAlign;
}

AbiCase::AbiCase(const CaseInputs& in, const Choices& ch) : in_(in), ch_(ch) {
  const auto& c = in.spec;
  const int64_t B = c.batch, Hq = c.Hq(), Hkv = c.Hkv, D = c.D, M = c.M, ps = c.ps;
  if (ch.has_ring()) {
    // The ABI's ring has M slots per head whatever positions the case reaches (a plugin
    // indexes slot p mod M), so a matrix line with M far beyond its context asks for a ring
    // of that size: refused here with its size (in FP64: the product can exceed int64).
    const double ring_bytes = static_cast<double>(B) * static_cast<double>(Hq) *
                              static_cast<double>(M) *
                              (static_cast<double>(D) * (2.0 + 4.0) + 4 + 8 + 4);
    const double memory =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    require(ring_bytes <= memory, "case ", c.id, ": the plugin ABI's ring of M = ", M,
            " slots per head needs ", ring_bytes, " bytes, more than this machine's memory (",
            memory, " bytes); the CPU modes keep min(M, positions) slots and run it");
  }
  // Pages: request b needs ceil(T_b / ps) for its T_b = P_b + steps tokens; all requests'
  // pages are one pool, handed out in a seeded random order.
  std::vector<int64_t> need(static_cast<size_t>(B));
  int64_t pages = 0, max_pages = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t T = in.requests[static_cast<size_t>(b)].prompt + c.steps;
    need[static_cast<size_t>(b)] = (T + ps - 1) / ps;
    pages += need[static_cast<size_t>(b)];
    max_pages = std::max(max_pages, need[static_cast<size_t>(b)]);
  }
  std::vector<int32_t> perm(static_cast<size_t>(pages));
  for (size_t j = 0; j < perm.size(); ++j) perm[j] = static_cast<int32_t>(j);
  for (int64_t j = pages - 1; j > 0; --j)
    std::swap(perm[static_cast<size_t>(j)],
              perm[static_cast<size_t>(
                  static_cast<int64_t>(uniform01(c.seed, 99, static_cast<uint64_t>(j)) *
                                       static_cast<double>(j + 1)) %
                  (j + 1))]);
  page_table_.assign(static_cast<size_t>(B * max_pages), -1);
  for (int64_t b = 0, next = 0; b < B; ++b)
    for (int64_t j = 0; j < need[static_cast<size_t>(b)]; ++j)
      page_table_[static_cast<size_t>(b * max_pages + j)] = perm[static_cast<size_t>(next++)];

  auto& p = layout_.params;
  p.head_dim = c.D;
  p.num_q_heads = c.Hq();
  p.num_kv_heads = c.Hkv;
  p.batch = c.batch;
  p.page_size = c.ps;
  p.kv_layout = ch.kv_layout;
  p.ring_layout = ch.ring_layout;
  p.num_pages = static_cast<int32_t>(pages);
  p.max_pages_per_request = static_cast<int32_t>(max_pages);
  p.device_id = 0;
  p.variant = ch.variant;
  p.ring = c.M;
  p.tail = c.r;
  p.sinks = c.F;
  p.gen_min = c.gen_min;
  p.tau = c.tau;
  p.threshold = match_threshold(c.D, c.tau);
  p.softmax_scale = in.scale;
  p.max_context = c.max_kv_len();
  p.depth_cap = c.K;
  p.refresh = c.N;
  p.gate_window = c.W;
  p.gate_probe = c.P;
  p.gate_margin = c.mu;
  p.gate_min_hit = c.hmin;
  p.gate_fixed_bytes = c.Bfix;

  // q, q̃, o: [B, Hq, D], padded by 8 elements per head and per row when chosen (16-byte
  // rows stay aligned); lse [B, Hq] with a padded row.
  const int64_t hs = ch.padded_io ? D + 8 : D, rs = ch.padded_io ? Hq * hs + 8 : Hq * D;
  const int64_t lrs = ch.padded_io ? (Hq + 7) / 8 * 8 + 8 : Hq;
  add_tensor(kQ, MACV_BF16, {B, Hq, D}, {rs, hs, 1});
  add_tensor(kQTilde, MACV_BF16, {B, Hq, D}, {rs, hs, 1});
  if (ch.kv_layout == MACV_KV_NHD) {
    add_tensor(kKCache, MACV_BF16, {pages, ps, Hkv, D}, {ps * Hkv * D, Hkv * D, D, 1});
    add_tensor(kVCache, MACV_BF16, {pages, ps, Hkv, D}, {ps * Hkv * D, Hkv * D, D, 1});
  } else {
    add_tensor(kKCache, MACV_BF16, {pages, Hkv, ps, D}, {Hkv * ps * D, ps * D, D, 1});
    add_tensor(kVCache, MACV_BF16, {pages, Hkv, ps, D}, {Hkv * ps * D, ps * D, D, 1});
  }
  add_tensor(kPageTable, MACV_I32, {B, max_pages}, {max_pages, 1});
  add_tensor(kPosition, MACV_I64, {B}, {1});
  add_tensor(kReady, MACV_U8, {B}, {1});
  if (ch.has_ring()) {
    const bool head_major = ch.ring_layout == MACV_RING_HEAD_MAJOR;
    const std::vector<int64_t> rv = head_major ? std::vector<int64_t>{Hq * M * D, M * D, D, 1}
                                               : std::vector<int64_t>{M * Hq * D, D, Hq * D, 1};
    const std::vector<int64_t> rs1 =
        head_major ? std::vector<int64_t>{Hq * M, M, 1} : std::vector<int64_t>{M * Hq, 1, Hq};
    add_tensor(kRingQ, MACV_BF16, {B, Hq, M, D}, rv);
    add_tensor(kRingO, ch.ring_o_dtype, {B, Hq, M, D}, rv);
    add_tensor(kRingLse, MACV_F32, {B, Hq, M}, rs1);
    add_tensor(kRingPos, MACV_I64, {B, Hq, M}, rs1);
    if (ch.ring_depth) add_tensor(kRingDepth, MACV_I32, {B, Hq, M}, rs1);
    if (ch.gate) add_tensor(kGateState, MACV_I64, {B, 5}, {5, 1});
  }
  add_tensor(kOut, ch.out_dtype, {B, Hq, D}, {rs, hs, 1});
  add_tensor(kLse, MACV_F32, {B, Hq}, {lrs, 1});
  if (ch.decisions == MACV_DECISIONS_REPORTED) {
    add_tensor(kHit, MACV_U8, {B, Hq}, {Hq, 1});
    add_tensor(kMatchPos, MACV_I64, {B, Hq}, {Hq, 1});
  }
  if (ch.reports_keys_read) add_tensor(kKeysRead, MACV_I64, {B, Hq}, {Hq, 1});
  if (ch.full_attention) {
    add_tensor(kFullOut, ch.out_dtype, {B, Hq, D}, {rs, hs, 1});
    add_tensor(kFullLse, MACV_F32, {B, Hq}, {lrs, 1});
  }
  if (ch.plugin_prefill) {
    int64_t N = 1;
    for (const auto& rq : in.requests) N = std::max(N, std::min(rq.prompt, M));
    add_tensor(kPrefQ, MACV_BF16, {B, N, Hq, D}, {N * Hq * D, Hq * D, D, 1});
    add_tensor(kPrefQTilde, MACV_BF16, {B, N, Hq, D}, {N * Hq * D, Hq * D, D, 1});
    add_tensor(kPrefFirst, MACV_I64, {B}, {1});
    add_tensor(kPrefCount, MACV_I64, {B}, {1});
  }
}

int64_t AbiCase::position(int b, int64_t s) const {
  return in_.requests[static_cast<size_t>(b)].prompt + s;
}

int64_t AbiCase::ring_offset(int b, int h, int64_t j, bool vector) const {
  const TensorDesc& d = layout_.t[vector ? kRingQ : kRingLse];
  return b * d.strides[0] + h * d.strides[1] + j * d.strides[2];
}

void AbiCase::poison(int t) {
  const TensorDesc& d = layout_.t[t];
  if (!d.present) return;
  uint8_t* p = arena_ + d.offset;
  const size_t n = d.bytes / elem_size(d.dtype);
  switch (d.dtype) {
    case MACV_BF16: std::fill_n(reinterpret_cast<uint16_t*>(p), n, kBf16Nan); break;
    case MACV_F32: std::fill_n(reinterpret_cast<float*>(p), n, f32_nan()); break;
    case MACV_I32: std::fill_n(reinterpret_cast<int32_t*>(p), n, -1); break;
    case MACV_I64:
      // Ring positions start "none" (−1); outputs get a value no step can produce (−2).
      std::fill_n(reinterpret_cast<int64_t*>(p), n, t == kRingPos ? -1 : kIntPoison);
      break;
    default: std::fill_n(p, n, kHitPoison); break;
  }
  mark(t);
}

void AbiCase::write_token(int b, int64_t t) {
  const auto& L = in_.requests[static_cast<size_t>(b)].layer;
  const auto& kd = layout_.t[kKCache];
  const int64_t ps = layout_.params.page_size, D = layout_.params.head_dim;
  const int64_t page =
      page_table_[static_cast<size_t>(b * layout_.params.max_pages_per_request + t / ps)];
  const bool nhd = ch_.kv_layout == MACV_KV_NHD;
  for (int64_t hk = 0; hk < layout_.params.num_kv_heads; ++hk) {
    const int64_t e = page * kd.strides[0] + (nhd ? (t % ps) * kd.strides[1] + hk * kd.strides[2]
                                                  : hk * kd.strides[1] + (t % ps) * kd.strides[2]);
    uint16_t* k = data<uint16_t>(kKCache) + e;
    uint16_t* v = data<uint16_t>(kVCache) + e;
    const float* ks = L.k_at(t, hk);
    const float* vs = L.v_at(t, hk);
    for (int64_t d = 0; d < D; ++d) {
      k[d] = ref::bf16_bits(ks[d]);
      v[d] = ref::bf16_bits(vs[d]);
    }
    dirty_.push_back(
        {layout_.t[kKCache].offset + static_cast<uint64_t>(e) * 2, static_cast<uint64_t>(D) * 2});
    dirty_.push_back(
        {layout_.t[kVCache].offset + static_cast<uint64_t>(e) * 2, static_cast<uint64_t>(D) * 2});
  }
}

void AbiCase::host_prefill() {
  const auto& c = in_.spec;
  const int64_t M = c.M, r = c.r, F = c.F, D = c.D, G = c.G, Hkv = c.Hkv;
  constexpr int64_t kChunk = 32;  // positions sharing each K/V block read (attend_many)
  for (int b = 0; b < c.batch; ++b) {
    const auto& rq = in_.requests[static_cast<size_t>(b)];
    const int64_t P = rq.prompt, first = std::max<int64_t>(0, P - M);
    const int64_t chunks = (P - first + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic) collapse(2)
    for (int64_t hk = 0; hk < Hkv; ++hk)
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t p0 = first + ch * kChunk, p1 = std::min(P, p0 + kChunk);
        std::vector<ref::RangeQuery> qs;
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t e = prefix_end(p, r);
            qs.push_back({rq.layer.q_post_at(p, h), sink_end(F, e), e});  // [Fe(E(p)), E(p))
          }
        const auto states = ref::attend_many<double>(rq.layer, hk, in_.scale, qs);
        size_t i = 0;
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
          for (int64_t p = p0; p < p1; ++p) {
            const auto& st = states[i++];
            const int64_t j = p % M, ev = ring_offset(b, static_cast<int>(h), j, true);
            const int64_t es = ring_offset(b, static_cast<int>(h), j, false);
            const float* qt = rq.layer.q_pre_at(p, h);
            for (int64_t d = 0; d < D; ++d) {
              data<uint16_t>(kRingQ)[ev + d] = ref::bf16_bits(qt[d]);
              store_float(data<uint8_t>(kRingO), ch_.ring_o_dtype, ev + d,
                          st.is_empty() ? 0.0 : st.o[d]);
            }
            const double lse = ch_.lse_base2 ? lse_to_log2(st.lse) : st.lse;
            data<float>(kRingLse)[es] = static_cast<float>(lse);
            data<int64_t>(kRingPos)[es] = p;
            if (ch_.ring_depth) data<int32_t>(kRingDepth)[es] = 0;
          }
      }
  }
}

void AbiCase::begin(bool build_ring) {
  require(arena_ != nullptr, "AbiCase::begin before attach");
  for (int t = 0; t < kNumTensors; ++t) poison(t);
  // The gate state is zero when a request starts (semantics §3.5).
  if (ch_.gate) std::memset(data<uint8_t>(kGateState), 0, layout_.t[kGateState].bytes);
  std::memcpy(data<int32_t>(kPageTable), page_table_.data(), page_table_.size() * 4);
  const auto& c = in_.spec;
  for (int b = 0; b < c.batch; ++b) {
    const auto& rq = in_.requests[static_cast<size_t>(b)];
    data<uint8_t>(kReady)[b] = rq.ready ? 1 : 0;
    for (int64_t t = 0; t < rq.prompt; ++t) write_token(b, t);
  }
  if (ch_.plugin_prefill) {
    const auto& qd = layout_.t[kPrefQ];
    const int64_t N = qd.shape[1], HD = static_cast<int64_t>(c.Hq()) * c.D;
    for (int b = 0; b < c.batch; ++b) {
      const auto& rq = in_.requests[static_cast<size_t>(b)];
      const int64_t first = std::max<int64_t>(0, rq.prompt - c.M), n = rq.prompt - first;
      data<int64_t>(kPrefFirst)[b] = first;
      data<int64_t>(kPrefCount)[b] = n;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < HD; ++e) {
          data<uint16_t>(kPrefQ)[(b * N + j) * HD + e] =
              ref::bf16_bits(rq.layer.q_post[static_cast<size_t>((first + j) * HD + e)]);
          data<uint16_t>(kPrefQTilde)[(b * N + j) * HD + e] =
              ref::bf16_bits(rq.layer.q_pre[static_cast<size_t>((first + j) * HD + e)]);
        }
    }
  } else if (build_ring && ch_.has_ring()) {
    host_prefill();
  }
  dirty_.assign(1, Range{0, layout_.arena_bytes});
}

std::string AbiCase::check_prefill() const {
  const auto& c = in_.spec;
  const int D = c.D;
  for (int b = 0; b < c.batch; ++b) {
    const auto& rq = in_.requests[static_cast<size_t>(b)];
    const int64_t first = std::max<int64_t>(0, rq.prompt - c.M);
    for (int h = 0; h < c.Hq(); ++h)
      for (int64_t j = 0; j < c.M; ++j) {
        // The prompt position slot j holds, if any: the largest p < P with p mod M = j.
        int64_t p = rq.prompt - 1 - ((rq.prompt - 1 - j) % c.M + c.M) % c.M;
        if (p < first) p = -1;
        const int64_t ev = ring_offset(b, h, j, true), es = ring_offset(b, h, j, false);
        const int64_t pos = data<int64_t>(kRingPos)[es];
        const float lse = data<float>(kRingLse)[es];
        const std::string where = msg("prefill: request ", b, " head ", h, " slot ", j, ": ");
        if (p < 0) {
          bool untouched = pos == -1 && std::isnan(lse);
          for (int d = 0; d < D && untouched; ++d)
            untouched = data<uint16_t>(kRingQ)[ev + d] == kBf16Nan;
          if (!untouched) return where + "holds no prompt position but was written";
          continue;
        }
        if (pos != p) return where + msg("holds position ", pos, ", expected ", p);
        if (ch_.ring_depth && data<int32_t>(kRingDepth)[es] != 0)
          return where + msg("chain depth ", data<int32_t>(kRingDepth)[es],
                             " for a prompt entry (must be 0)");
        for (int d = 0; d < D; ++d)
          if (data<uint16_t>(kRingQ)[ev + d] != ref::bf16_bits(rq.layer.q_pre_at(p, h)[d]))
            return where + msg("q̃ of position ", p, " is not a bit copy (dim ", d, ")");
        const bool want_empty = prefix_end(p, c.r) <= c.F;
        const bool is_empty = !(lse > -std::numeric_limits<float>::infinity());
        if (want_empty != is_empty)
          return where + msg("L = ", lse, " for position ", p, ", whose range [Fe(E(p)), E(p)) is ",
                             want_empty ? "empty" : "not empty");
      }
  }
  return {};
}

void AbiCase::before_step(int64_t s) {
  const auto& c = in_.spec;
  const auto& qd = layout_.t[kQ];
  for (int b = 0; b < c.batch; ++b) {
    const auto& L = in_.requests[static_cast<size_t>(b)].layer;
    const int64_t m = position(b, s);
    write_token(b, m);
    data<int64_t>(kPosition)[b] = m;
    for (int h = 0; h < c.Hq(); ++h) {
      const int64_t e = b * qd.strides[0] + h * qd.strides[1];
      for (int d = 0; d < c.D; ++d) {
        data<uint16_t>(kQ)[e + d] = ref::bf16_bits(L.q_post_at(m, h)[d]);
        data<uint16_t>(kQTilde)[e + d] = ref::bf16_bits(L.q_pre_at(m, h)[d]);
      }
    }
  }
  mark(kQ);
  mark(kQTilde);
  mark(kPosition);
  for (int t : {kOut, kLse, kHit, kMatchPos, kKeysRead, kFullOut, kFullLse}) poison(t);
  input_hash_.clear();
  for (int t : {kQ, kQTilde, kKCache, kVCache, kPageTable, kPosition, kReady})
    input_hash_.push_back(hash(t));
  for (int k = 0; k < kRingTensors; ++k) {
    const auto& d = layout_.t[kRing[k]];
    ring_before_[k].assign(arena_ + d.offset, arena_ + d.offset + d.bytes);
  }
  gate_before_.clear();
  if (ch_.gate)
    gate_before_.assign(data<int64_t>(kGateState), data<int64_t>(kGateState) + 5 * c.batch);
}

bool AbiCase::gate_state(int b, std::array<int64_t, 5>* out) const {
  if (!ch_.gate) return false;
  std::memcpy(out->data(), data<int64_t>(kGateState) + 5 * b, 5 * sizeof(int64_t));
  return true;
}

std::string AbiCase::after_step(int64_t s, StepOutput* out) {
  const auto& c = in_.spec;
  const int B = c.batch, Hq = c.Hq(), D = c.D;
  const int64_t M = c.M;
  std::string problem;
  auto note = [&](const std::string& what) {
    if (problem.empty()) problem = msg("step ", s, ": ", what);
  };
  // Inputs: the call must not have changed a byte of them (padding included).
  {
    size_t k = 0;
    for (int t : {kQ, kQTilde, kKCache, kVCache, kPageTable, kPosition, kReady}) {
      const uint64_t h = hash(t);
      if (h != input_hash_[k])
        note(msg("the implementation changed its input ", tensor_name(t), " (hash ", input_hash_[k],
                 " before the call, ", h, " after)"));
      ++k;
    }
  }
  const auto& od = layout_.t[kOut];
  const auto& ld = layout_.t[kLse];
  const auto& hd = layout_.t[kHit];
  const size_t ro_es = elem_size(ch_.ring_o_dtype);
  out->assign(static_cast<size_t>(B), std::vector<HeadOutput>(static_cast<size_t>(Hq)));
  for (int b = 0; b < B; ++b) {
    const auto& rq = in_.requests[static_cast<size_t>(b)];
    const int64_t m = position(b, s), j = m % M;
    for (int h = 0; h < Hq; ++h) {
      auto& ho = (*out)[static_cast<size_t>(b)][static_cast<size_t>(h)];
      const std::string where = msg("request ", b, " head ", h, ": ");
      const int64_t oh = b * Hq + h;  // hit, match_pos, keys_read: packed [B, Hq]
      ho.decision_reported = hd.present != 0;
      if (ho.decision_reported) {
        const uint8_t hit = data<uint8_t>(kHit)[oh];
        if (hit > 1) note(where + msg("hit = ", int(hit), " (not written: neither 0 nor 1)"));
        ho.hit = hit == 1;
        const int64_t mp = data<int64_t>(kMatchPos)[oh];
        if (!ho.hit && hit == 0 && mp != -1)
          note(where + msg("match_pos = ", mp, " on a miss (must be -1)"));
        ho.match_pos = ho.hit ? mp : -1;
      }
      if (ch_.reports_keys_read) {
        ho.keys_read = data<int64_t>(kKeysRead)[oh];
        if (ho.keys_read < 0) note(where + msg("keys_read = ", ho.keys_read, " (not written)"));
      }
      ho.o.resize(static_cast<size_t>(D));
      const int64_t oe = b * od.strides[0] + h * od.strides[1];
      for (int d = 0; d < D; ++d)
        ho.o[static_cast<size_t>(d)] = load_float(data<uint8_t>(kOut), ch_.out_dtype, oe + d);
      const double lse = data<float>(kLse)[b * ld.strides[0] + h];
      ho.lse = ch_.lse_base2 ? lse_from_log2(lse) : lse;
      if (ch_.full_attention) {
        // Output and LSE bit for bit (same layout and dtype as o and lse).
        const size_t es = elem_size(ch_.out_dtype);
        bool same = std::memcmp(data<uint8_t>(kLse) + (b * ld.strides[0] + h) * 4,
                                data<uint8_t>(kFullLse) + (b * ld.strides[0] + h) * 4, 4) == 0;
        same = same && std::memcmp(data<uint8_t>(kOut) + oe * es, data<uint8_t>(kFullOut) + oe * es,
                                   D * es) == 0;
        ho.full_bit_identical = same ? 1 : 0;
      }
      if (!ch_.writes_ring) continue;
      // The ring entry of m (slot m mod M): written iff ready, q̃ a bit copy.
      const int64_t ev = ring_offset(b, h, j, true), es = ring_offset(b, h, j, false);
      ho.entry_valid = true;
      const int64_t pos = data<int64_t>(kRingPos)[es];
      bool q_exact = true;
      for (int d = 0; d < D; ++d)
        q_exact =
            q_exact && data<uint16_t>(kRingQ)[ev + d] == ref::bf16_bits(rq.layer.q_pre_at(m, h)[d]);
      if (rq.ready) {
        ho.entry_written = pos == m;
      } else {
        const int64_t bq = ev * 2, bo = ev * static_cast<int64_t>(ro_es);
        ho.entry_written =
            std::memcmp(data<uint8_t>(kRingQ) + bq, ring_before_[0].data() + bq, D * 2) != 0 ||
            std::memcmp(data<uint8_t>(kRingO) + bo, ring_before_[1].data() + bo, D * ro_es) != 0 ||
            std::memcmp(data<uint8_t>(kRingLse) + es * 4, ring_before_[2].data() + es * 4, 4) !=
                0 ||
            std::memcmp(data<uint8_t>(kRingPos) + es * 8, ring_before_[3].data() + es * 8, 8) != 0;
      }
      ho.entry_q_exact = q_exact;
      ho.entry_o.resize(static_cast<size_t>(D));
      for (int d = 0; d < D; ++d)
        ho.entry_o[static_cast<size_t>(d)] =
            load_float(data<uint8_t>(kRingO), ch_.ring_o_dtype, ev + d);
      const double el = data<float>(kRingLse)[es];
      ho.entry_lse = ch_.lse_base2 ? lse_from_log2(el) : el;
      if (ch_.ring_depth && rq.ready) ho.entry_depth = data<int32_t>(kRingDepth)[es];
    }
  }
  // Ring: every slot but m mod M of the ready requests (when the implementation writes the
  // ring) must be bit-identical to its snapshot. The allowed slots are copied into the
  // snapshot, then each ring tensor is compared whole.
  if (ch_.writes_ring)
    for (int b = 0; b < B; ++b) {
      if (!in_.requests[static_cast<size_t>(b)].ready) continue;
      const int64_t j = position(b, s) % M;
      for (int h = 0; h < Hq; ++h) {
        const int64_t ev = ring_offset(b, h, j, true), es = ring_offset(b, h, j, false);
        std::memcpy(ring_before_[0].data() + ev * 2, data<uint8_t>(kRingQ) + ev * 2, D * 2);
        std::memcpy(ring_before_[1].data() + ev * ro_es, data<uint8_t>(kRingO) + ev * ro_es,
                    D * ro_es);
        std::memcpy(ring_before_[2].data() + es * 4, data<uint8_t>(kRingLse) + es * 4, 4);
        std::memcpy(ring_before_[3].data() + es * 8, data<uint8_t>(kRingPos) + es * 8, 8);
        if (ch_.ring_depth)
          std::memcpy(ring_before_[4].data() + es * 4, data<uint8_t>(kRingDepth) + es * 4, 4);
      }
    }
  // Gate state: a request that is not ready is ineligible, and an ineligible step leaves its
  // state alone; the ready rows are compared with the expected state by run_case.
  if (ch_.gate)
    for (int b = 0; b < B; ++b) {
      if (in_.requests[static_cast<size_t>(b)].ready) continue;
      for (int f = 0; f < 5; ++f) {
        const int64_t now = data<int64_t>(kGateState)[5 * b + f];
        const int64_t was = gate_before_[static_cast<size_t>(5 * b + f)];
        if (now != was) {
          note(msg("gate state of request ", b, " (not ready) changed: ", kGateStateFields[f], " ",
                   was, " before the call, ", now,
                   " after; an ineligible step leaves the gate state alone"));
          break;
        }
      }
    }
  for (int k = 0; k < kRingTensors && problem.empty(); ++k) {
    const auto& d = layout_.t[kRing[k]];
    // An undeclared tensor (ring depth) has no bytes and a null snapshot; memcmp with a null
    // pointer is undefined even for 0 bytes.
    if (d.bytes == 0 || std::memcmp(arena_ + d.offset, ring_before_[k].data(), d.bytes) == 0)
      continue;
    // Name the first slot that changed.
    const size_t es = elem_size(d.dtype), per = k < 2 ? static_cast<size_t>(D) : 1;
    for (int b = 0; b < B && problem.empty(); ++b)
      for (int h = 0; h < Hq && problem.empty(); ++h)
        for (int64_t j = 0; j < M; ++j) {
          const size_t off = static_cast<size_t>(ring_offset(b, h, j, k < 2)) * es;
          if (std::memcmp(arena_ + d.offset + off, ring_before_[k].data() + off, per * es) != 0) {
            note(msg(tensor_name(kRing[k]), " of request ", b, " head ", h, " slot ", j,
                     " changed; a step may write only slot m mod M of a ready request",
                     ch_.writes_ring ? "" : ", and this implementation declares it writes none"));
            break;
          }
        }
  }
  return problem;
}

std::vector<Range> readback(const CaseLayout& lay) {
  std::vector<Range> r;
  for (int t = 0; t < kNumTensors; ++t)
    if (lay.t[t].present && t != kPrefQ && t != kPrefQTilde && t != kPrefFirst && t != kPrefCount)
      r.push_back({lay.t[t].offset, lay.t[t].bytes});
  return r;
}

}  // namespace mac::verify::abi
