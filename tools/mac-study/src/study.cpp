#include "mac/study/study.hpp"

#include "mac/study/shard.hpp"

#include "h5table.hpp"
#include "mac/io/atomic_file.hpp"
#include "mac/io/schema.hpp"
#include "mac/io/trace_io.hpp"
#include "mac/oracle/oracle.hpp"
#include "mac/ref/synth.hpp"
#include "mac/tools/progress.hpp"

#include <omp.h>
#include <Eigen/Core>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace mac::study {

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------------
// The bound.
// ---------------------------------------------------------------------------------

namespace {
double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}
}  // namespace

double mass_shift_bound(double rho, double a, double b) {
  // logit ρ̃ = logit ρ − ln κ with κ = E_π[e^{−δ}] ∈ [e^{−b}, e^{−a}], so logit ρ̃ ∈ [ℓ + a, ℓ + b]
  // and σ is monotone: the extreme shifts are at the ends.
  if (!(rho > 0) || !(rho < 1)) return 0.0;
  const double l = std::log(rho) - std::log1p(-rho);
  return std::max(std::abs(sigmoid(l + a) - rho), std::abs(sigmoid(l + b) - rho));
}

double drift_bound(const BoundInputs& in) {
  // ‖o_mac − o_full‖ ≤ (1−ρ)·‖õ_P − o_P‖ + |ρ − ρ̃|·‖õ_P − o_R‖
  //                 ≤ 2·Vmax·[(1−ρ)·tanh(W/4) + max_c |σ(logit ρ + c) − ρ|].
  const double W = in.delta_max - in.delta_min;
  return 2.0 * in.v_max *
         ((1.0 - in.rho) * std::tanh(W / 4.0) +
          mass_shift_bound(in.rho, in.delta_min, in.delta_max));
}

double paper_bound(const BoundInputs& in) {
  const double delta = std::max(std::abs(in.delta_min), std::abs(in.delta_max));
  return delta * (1.0 - in.rho) * in.v_mean_prefix;
}

// ---------------------------------------------------------------------------------
// Chains.
// ---------------------------------------------------------------------------------

ChainTracker::ChainTracker(int64_t ring, int64_t tail, int64_t sinks)
    : ring_(ring),
      tail_(tail),
      sinks_(sinks),
      slot_pos_(static_cast<size_t>(ring), -1),
      slot_node_(static_cast<size_t>(ring), -1) {}

void ChainTracker::prefill(int64_t p) {
  const int64_t e = prefix_end(p, tail_);
  nodes_.push_back({sink_end(sinks_, e), e, p, -1, 0});
  slot_pos_[static_cast<size_t>(p % ring_)] = p;
  slot_node_[static_cast<size_t>(p % ring_)] = static_cast<int64_t>(nodes_.size()) - 1;
}

const ChainNode* ChainTracker::entry(int64_t p) const {
  if (p < 0) return nullptr;
  const auto s = static_cast<size_t>(p % ring_);
  return slot_pos_[s] == p ? &nodes_[static_cast<size_t>(slot_node_[s])] : nullptr;
}

const ChainNode& ChainTracker::step(int64_t m, int64_t hit_pos) {
  const int64_t em = prefix_end(m, tail_);
  ChainNode n;
  n.qpos = m;
  n.end = em;
  if (hit_pos >= 0) {
    // Read before write: the slot of m may hold hit_pos itself (lag M).
    const auto s = static_cast<size_t>(hit_pos % ring_);
    require(slot_pos_[s] == hit_pos, "chain tracker: no entry for the hit on position ", hit_pos,
            " at m = ", m);
    const auto& parent = nodes_[static_cast<size_t>(slot_node_[s])];
    n.begin = prefix_end(hit_pos, tail_);
    n.parent = slot_node_[s];
    n.depth = parent.depth + 1;
  } else {
    n.begin = sink_end(sinks_, em);
  }
  nodes_.push_back(n);
  const auto s = static_cast<size_t>(m % ring_);
  slot_pos_[s] = m;
  slot_node_[s] = static_cast<int64_t>(nodes_.size()) - 1;
  return nodes_.back();
}

std::vector<ChainNode> ChainTracker::segments(int64_t p) const {
  std::vector<ChainNode> out;
  const ChainNode* n = entry(p);
  while (n != nullptr) {
    out.push_back(*n);
    n = n->parent >= 0 ? &nodes_[static_cast<size_t>(n->parent)] : nullptr;
  }
  return out;
}

std::pair<double, double> drift_range(const ref::LayerData& layer, int64_t h, double scale,
                                      int64_t m, const std::vector<ChainNode>& segments) {
  const Eigen::Index D = layer.head_dim;
  const int64_t hk = h / layer.group_size();
  using RowMapF =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                 Eigen::OuterStride<>>;
  const Eigen::Index stride = layer.num_kv_heads * D;
  const Eigen::Map<const Eigen::VectorXf> qm(layer.q_post_at(m, h), D);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  Eigen::VectorXf u, x;
  for (const auto& sg : segments) {
    if (sg.end <= sg.begin) continue;
    // δ_t = s·(q_m − q_c)·k_t: the difference is formed in FP32 from BF16-exact inputs
    // (exact: both are BF16), the dot products in FP32 (relative error ~1e-7 of |δ|).
    u = (qm - Eigen::Map<const Eigen::VectorXf>(layer.q_post_at(sg.qpos, h), D)) *
        static_cast<float>(scale);
    const RowMapF k(layer.k_at(sg.begin, hk), sg.end - sg.begin, D, Eigen::OuterStride<>(stride));
    x.noalias() = k * u;
    lo = std::min(lo, static_cast<double>(x.minCoeff()));
    hi = std::max(hi, static_cast<double>(x.maxCoeff()));
  }
  if (lo > hi) return {0.0, 0.0};  // empty prefix
  return {lo, hi};
}

// ---------------------------------------------------------------------------------
// Configuration and hashing.
// ---------------------------------------------------------------------------------

namespace {
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

std::string RunSpec::key() const {
  // The trace path is recorded in the run file but is not part of the identity: the data
  // fingerprint is (the same data under another name is the same run).
  return msg("v", kRunVersion, ";fingerprint=", fingerprint, ";layer=", layer,
             ";tau=", num(params.tau), ";ring=", params.ring, ";tail=", params.tail,
             ";sinks=", params.sinks, ";gen_min=", params.gen_min, ";variant=", to_string(variant),
             ";storage=", to_string(storage), ";precision=", mac::to_string(precision),
             ";prefill=", prefill, ";steps=", steps, ";bound=", bound ? 1 : 0,
             // Policies only when set: the keys (and files) of runs without them are unchanged.
             params.depth_cap >= 0 ? msg(";depth_cap=", params.depth_cap) : "",
             params.refresh > 0 ? msg(";refresh=", params.refresh) : "");
}

std::string RunSpec::hash() const {
  const auto k = key();
  return hex16(fnv1a(k.data(), k.size()));
}

std::string layer_fingerprint(const ref::LayerData& l, int64_t tokens) {
  require(tokens >= 0 && tokens <= l.tokens, "fingerprint: tokens = ", tokens, " outside [0, ",
          l.tokens, "]");
  uint64_t h = 1469598103934665603ull;
  const int64_t shape[4] = {tokens, l.num_q_heads, l.num_kv_heads, l.head_dim};
  h = fnv1a(shape, sizeof shape, h);
  const auto nq = static_cast<size_t>(tokens * l.num_q_heads * l.head_dim);
  const auto nk = static_cast<size_t>(tokens * l.num_kv_heads * l.head_dim);
  h = fnv1a(l.q_pre.data(), nq * sizeof(float), h);
  h = fnv1a(l.q_post.data(), nq * sizeof(float), h);
  h = fnv1a(l.k.data(), nk * sizeof(float), h);
  h = fnv1a(l.v.data(), nk * sizeof(float), h);
  return hex16(h);
}

// ---------------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------------

void RunResult::resize(int64_t S, int64_t hq) {
  steps = S;
  heads = hq;
  const auto n = static_cast<size_t>(S * hq);
  position.assign(static_cast<size_t>(S), 0);
  hit.assign(n, 0);
  lag.assign(n, -1);
  keys_read.assign(n, 0);
  depth.assign(n, 0);
  for (auto* v : {&rel_l2, &max_abs, &lse_err, &abs_l2, &delta_min, &delta_max, &rho, &rho_mac,
                  &bound, &bound_paper})
    v->assign(n, kNaN);
}

double RunResult::hit_rate() const {
  int64_t h = 0;
  for (auto x : hit) h += x;
  return hit.empty() ? 0.0 : static_cast<double>(h) / static_cast<double>(hit.size());
}

double RunResult::kv_fraction() const {
  double read = 0, full = 0;
  for (int64_t i = 0; i < steps; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      read += static_cast<double>(keys_read[static_cast<size_t>(i * heads + h)]);
      full += static_cast<double>(position[static_cast<size_t>(i)] + 1);
    }
  return full > 0 ? read / full : 0.0;
}

void ExactCache::fill_v_norms(const ref::LayerData& layer) {
  kv_heads = layer.num_kv_heads;
  const int64_t T = layer.tokens, Hkv = layer.num_kv_heads, D = layer.head_dim;
  v_norm_max.assign(static_cast<size_t>(T * Hkv), 0.0);
  v_norm_sum.assign(static_cast<size_t>((T + 1) * Hkv), 0.0);
  for (int64_t hk = 0; hk < Hkv; ++hk) {
    double mx = 0, sum = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float* v = layer.v_at(t, hk);
      double n2 = 0;
      for (int64_t d = 0; d < D; ++d) n2 += static_cast<double>(v[d]) * static_cast<double>(v[d]);
      const double n = std::sqrt(n2);
      mx = std::max(mx, n);
      v_norm_max[static_cast<size_t>(t * Hkv + hk)] = mx;
      v_norm_sum[static_cast<size_t>(t * Hkv + hk)] = sum;
      sum += n;
    }
    v_norm_sum[static_cast<size_t>(T * Hkv + hk)] = sum;
  }
}

ExactCache ExactCache::compute(const ref::LayerData& layer, double scale, int64_t prefill,
                               int64_t steps, bool progress, const std::string& label) {
  ExactCache c;
  c.prefill = prefill;
  c.steps = steps;
  c.heads = layer.num_q_heads;
  c.head_dim = layer.head_dim;
  c.out.resize(static_cast<size_t>(steps * c.heads * c.head_dim));
  c.lse.resize(static_cast<size_t>(steps * c.heads));
  tools::Progress prog(label, steps, 5.0, progress);
  for (int64_t i = 0; i < steps; ++i) {
    const auto st = oracle::full_attention(layer, scale, prefill + i);  // OpenMP inside
    for (int64_t h = 0; h < c.heads; ++h) {
      const auto& s = st[static_cast<size_t>(h)];
      c.lse[static_cast<size_t>(i * c.heads + h)] = s.lse;
      std::copy(s.o.data(), s.o.data() + c.head_dim,
                c.out.begin() + (i * c.heads + h) * c.head_dim);
    }
    prog.update(i + 1);
  }
  prog.finish();
  c.fill_v_norms(layer);
  return c;
}

RunResult execute_run(const ref::LayerData& layer, double scale, const RunSpec& spec,
                      const ExactCache& exact, const std::function<void(int64_t)>& on_steps) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_seconds();
  tools::SimConfig cfg;
  cfg.params = spec.params;
  cfg.variant = spec.variant;
  cfg.storage = spec.storage;
  cfg.precision = spec.precision;
  cfg.prefill = spec.prefill;
  cfg.steps = spec.steps;
  cfg.oracle = false;  // exact full attention comes from the shared cache
  cfg.progress = false;
  cfg.validate(layer);
  const int64_t S = cfg.num_steps(layer), Hq = layer.num_q_heads, D = layer.head_dim,
                G = layer.group_size();
  const int64_t Hkv = layer.num_kv_heads;
  require(
      exact.prefill == spec.prefill && exact.steps == S && exact.heads == Hq && exact.head_dim == D,
      "exact cache does not match the run (prefill ", exact.prefill, " vs ", spec.prefill,
      ", steps ", exact.steps, " vs ", S, ")");
  RunResult r;
  r.spec = spec;
  r.resize(S, Hq);
  const int64_t M = spec.params.ring;
  std::vector<ChainTracker> chains(static_cast<size_t>(Hq),
                                   ChainTracker(M, spec.params.tail, spec.params.sinks));
  for (int64_t p = std::max<int64_t>(0, spec.prefill - M); p < spec.prefill; ++p)
    for (auto& c : chains) c.prefill(p);

  int64_t i = 0, reported = 0;
  tools::simulate_layer(layer, scale, cfg, [&](const tools::StepRecord& rec) {
    const int64_t m = rec.position;
    r.position[static_cast<size_t>(i)] = m;
    for (int64_t h = 0; h < Hq; ++h) {
      const auto& hr = rec.heads[static_cast<size_t>(h)];
      const auto k = static_cast<size_t>(i * Hq + h);
      auto& chain = chains[static_cast<size_t>(h)];
      // The reused entry's segments are read before this step's write (it may share the slot).
      std::vector<ChainNode> segs;
      if (hr.hit && spec.bound) segs = chain.segments(hr.match_pos);
      const auto& node = chain.step(m, hr.hit ? hr.match_pos : -1);
      require(node.depth == hr.depth, "chain depth bookkeeping: tracker says ", node.depth,
              ", stepper says ", hr.depth, " at m = ", m, ", head ", h);
      r.hit[k] = hr.hit ? 1 : 0;
      r.lag[k] = hr.hit ? m - hr.match_pos : -1;
      r.keys_read[k] = hr.keys_read;
      r.depth[k] = hr.depth;
      const Eigen::Map<const Eigen::VectorXd> ex(exact.out_at(i, h), D);
      const double ex_lse = exact.lse[k];
      const double nrm = ex.norm();
      const double abs_l2 = (hr.out.o - ex).norm();
      r.abs_l2[k] = abs_l2;
      r.rel_l2[k] = nrm > 0 ? abs_l2 / nrm : abs_l2;
      r.max_abs[k] = (hr.out.o - ex).cwiseAbs().maxCoeff();
      r.lse_err[k] = std::abs(hr.out.lse - ex_lse);
      if (hr.hit && spec.bound) {
        const double cb = thread_cpu_seconds();
        const auto [a, b] = drift_range(layer, h, scale, m, segs);
        r.bound_cpu_seconds += thread_cpu_seconds() - cb;
        // MAC's recomputed mass ρ̃ = 1 − e^{L_prefix − L_out}; the recomputed part R is exact
        // (up to the stepper's rounding), so its LSE is L_out + ln ρ̃ and ρ = e^{L_R − L_full}.
        const double rho_mac = -std::expm1(hr.prefix.lse - hr.out.lse);
        const double rho =
            rho_mac > 0 ? std::min(1.0, std::exp(hr.out.lse + std::log(rho_mac) - ex_lse)) : 0.0;
        const int64_t hk = h / G;
        double vsum = 0;
        int64_t nkeys = 0;
        for (const auto& sg : segs) {
          if (sg.end <= sg.begin) continue;
          vsum += exact.v_norm_sum[static_cast<size_t>(sg.end * Hkv + hk)] -
                  exact.v_norm_sum[static_cast<size_t>(sg.begin * Hkv + hk)];
          nkeys += sg.end - sg.begin;
        }
        BoundInputs in;
        in.delta_min = a;
        in.delta_max = b;
        in.rho = rho;
        in.v_max = exact.v_norm_max[static_cast<size_t>(m * Hkv + hk)];
        in.v_mean_prefix = nkeys > 0 ? vsum / static_cast<double>(nkeys) : 0.0;
        r.delta_min[k] = a;
        r.delta_max[k] = b;
        r.rho[k] = rho;
        r.rho_mac[k] = rho_mac;
        r.bound[k] = drift_bound(in);
        r.bound_paper[k] = paper_bound(in);
      }
    }
    ++i;
    if (on_steps && (i % 32 == 0 || i == S)) {
      on_steps(i - reported);
      reported = i;
    }
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = thread_cpu_seconds() - c0;
  return r;
}

// ---------------------------------------------------------------------------------
// Files.
// ---------------------------------------------------------------------------------

std::string run_path(const std::string& out_dir, const RunSpec& spec) {
  return (fs::path(out_dir) / "runs" / (spec.hash() + ".h5")).string();
}

namespace {

namespace key = io::schema::study;
namespace run_key = io::schema::run;

/*! Calls `f(name, column)` for each [S, Hq] dataset of a run file, in file order: the one
 *  list the writer and the reader share. */
template <typename R, typename F>
void for_each_head_column(R& r, F&& f) {
  f(key::kHit, r.hit);
  f(key::kLag, r.lag);
  f(key::kKeysRead, r.keys_read);
  f(key::kDepth, r.depth);
  f(key::kRelL2, r.rel_l2);
  f(key::kMaxAbs, r.max_abs);
  f(key::kLseErr, r.lse_err);
  f(key::kAbsL2, r.abs_l2);
  f(key::kDeltaMin, r.delta_min);
  f(key::kDeltaMax, r.delta_max);
  f(key::kRho, r.rho);
  f(key::kRhoMac, r.rho_mac);
  f(key::kBound, r.bound);
  f(key::kBoundPaper, r.bound_paper);
}

}  // namespace

void write_run(const std::string& path, const RunResult& r) {
  io::write_h5_atomically(path, [&](hid_t id) {
    const auto& s = r.spec;
    h5::write_attr(id, io::schema::kSchema, std::string(kRunSchema));
    h5::write_attr(id, io::schema::kVersion, kRunVersion);
    h5::write_attr(id, key::kKey, s.key());
    h5::write_attr(id, key::kHash, s.hash());
    h5::write_attr(id, key::kTrace, s.trace);
    h5::write_attr(id, key::kTraceSource, s.source);
    h5::write_attr(id, key::kFingerprint, s.fingerprint);
    h5::write_attr(id, key::kLayer, s.layer);
    h5::write_attr(id, run_key::kTau, s.params.tau);
    h5::write_attr(id, run_key::kRing, s.params.ring);
    h5::write_attr(id, run_key::kTail, s.params.tail);
    h5::write_attr(id, run_key::kSinks, s.params.sinks);
    h5::write_attr(id, run_key::kGenMin, s.params.gen_min);
    if (s.params.depth_cap >= 0) h5::write_attr(id, run_key::kDepthCap, s.params.depth_cap);
    if (s.params.refresh > 0) h5::write_attr(id, run_key::kRefresh, s.params.refresh);
    h5::write_attr(id, key::kVariant, std::string(to_string(s.variant)));
    h5::write_attr(id, key::kStorage, std::string(to_string(s.storage)));
    h5::write_attr(id, key::kPrecision, std::string(mac::to_string(s.precision)));
    h5::write_attr(id, key::kPrefill, s.prefill);
    h5::write_attr(id, key::kSteps, r.steps);
    h5::write_attr(id, key::kBoundFlag, static_cast<int64_t>(s.bound));
    h5::write_attr(id, key::kSeconds, r.seconds);
    h5::write_attr(id, key::kCpuSeconds, r.cpu_seconds);
    h5::write_attr(id, key::kBoundCpuSeconds, r.bound_cpu_seconds);
    h5::write_attr(id, key::kHitRate, r.hit_rate());
    h5::write_attr(id, key::kKvFraction, r.kv_fraction());
    h5::write_attr(id, io::schema::kGitCommit, std::string(MAC_GIT_COMMIT));
    const std::vector<hsize_t> sh{static_cast<hsize_t>(r.steps), static_cast<hsize_t>(r.heads)};
    h5::write(id, key::kPosition, {static_cast<hsize_t>(r.steps)}, r.position, kLayout);
    for_each_head_column(
        r, [&](const char* name, const auto& col) { h5::write(id, name, sh, col, kLayout); });
    // Written last: a reader treats a file without it as incomplete.
    h5::write_attr(id, io::schema::kComplete, int64_t{1});
  });
}

RunResult read_run(const std::string& path) {
  const h5::Handle f = h5::open_file(path);
  const hid_t id = f.get();
  require(h5::has_attr(id, io::schema::kSchema) &&
              h5::attr_string(id, io::schema::kSchema) == kRunSchema,
          "'", path, "' is not a mac-study run file");
  require(h5::attr_int64(id, io::schema::kVersion) == kRunVersion, "'", path, "': unknown version");
  require(h5::has_attr(id, io::schema::kComplete) && h5::attr_int64(id, io::schema::kComplete) == 1,
          "'", path, "' is incomplete");
  RunResult r;
  auto& s = r.spec;
  s.trace = h5::attr_string(id, key::kTrace);
  s.source = h5::attr_string(id, key::kTraceSource);
  s.fingerprint = h5::attr_string(id, key::kFingerprint);
  s.layer = h5::attr_int64(id, key::kLayer);
  s.params.tau = h5::attr_double(id, run_key::kTau);
  s.params.ring = h5::attr_int64(id, run_key::kRing);
  s.params.tail = h5::attr_int64(id, run_key::kTail);
  s.params.sinks = h5::attr_int64(id, run_key::kSinks);
  s.params.gen_min = h5::attr_int64(id, run_key::kGenMin);
  if (h5::has_attr(id, run_key::kDepthCap))
    s.params.depth_cap = h5::attr_int64(id, run_key::kDepthCap);
  if (h5::has_attr(id, run_key::kRefresh)) s.params.refresh = h5::attr_int64(id, run_key::kRefresh);
  s.variant = parse_variant(h5::attr_string(id, key::kVariant));
  s.storage = parse_state_storage(h5::attr_string(id, key::kStorage));
  s.precision = mac::parse_precision(h5::attr_string(id, key::kPrecision));
  s.prefill = h5::attr_int64(id, key::kPrefill);
  s.bound = h5::attr_int64(id, key::kBoundFlag) != 0;
  const int64_t S = h5::attr_int64(id, key::kSteps);
  // The spec's steps is what was asked (0 = to the end); the key records it.
  const auto stored_key = h5::attr_string(id, key::kKey);
  const auto sp = stored_key.find(";steps=");
  if (sp == std::string::npos) {
    s.steps = S;
  } else {
    const char* digits = stored_key.c_str() + sp + 7;
    char* end = nullptr;
    errno = 0;
    s.steps = std::strtoll(digits, &end, 10);
    require(end != digits && errno == 0, "'", path, "': stored key has no number after ';steps='");
  }
  require(s.key() == stored_key, "'", path, "': stored key does not match its attributes");
  r.seconds = h5::attr_double(id, key::kSeconds);
  r.cpu_seconds = h5::attr_double(id, key::kCpuSeconds);
  r.bound_cpu_seconds = h5::attr_double(id, key::kBoundCpuSeconds);
  r.position = h5::read<int64_t>(id, key::kPosition, S);
  r.steps = S;
  const int64_t n = static_cast<int64_t>(h5::read<int8_t>(id, key::kHit).size());
  require(S > 0 && n % S == 0, "'", path, "': bad shape of ", key::kHit);
  r.heads = n / S;
  for_each_head_column(r, [&](const char* name, auto& col) {
    col = h5::read<typename std::decay_t<decltype(col)>::value_type>(id, name, n);
  });
  return r;
}

bool run_complete(const std::string& path, const RunSpec& spec) {
  if (!fs::exists(path)) return false;
  try {
    const h5::Handle f = h5::open_file(path);
    const hid_t id = f.get();
    return h5::has_attr(id, io::schema::kSchema) &&
           h5::attr_string(id, io::schema::kSchema) == kRunSchema &&
           h5::has_attr(id, io::schema::kComplete) &&
           h5::attr_int64(id, io::schema::kComplete) == 1 &&
           h5::attr_string(id, key::kKey) == spec.key();
  } catch (const InputError&) {
    return false;
  }
}

void write_exact(const std::string& path, const ExactCache& c) {
  io::write_h5_atomically(path, [&](hid_t f) {
    h5::write_attr(f, io::schema::kSchema, std::string(kExactSchema));
    h5::write_attr(f, io::schema::kVersion, kExactVersion);
    h5::write_attr(f, key::kPrefill, c.prefill);
    h5::write_attr(f, key::kSteps, c.steps);
    h5::write(f, key::kExactOut,
              {static_cast<hsize_t>(c.steps), static_cast<hsize_t>(c.heads),
               static_cast<hsize_t>(c.head_dim)},
              c.out, kLayout);
    h5::write(f, key::kExactLse, {static_cast<hsize_t>(c.steps), static_cast<hsize_t>(c.heads)},
              c.lse, kLayout);
    h5::write_attr(f, io::schema::kComplete, int64_t{1});
  });
}

bool read_exact(const std::string& path, int64_t prefill, int64_t steps, ExactCache& c) {
  if (!fs::exists(path)) return false;
  try {
    const h5::Handle f = h5::open_file(path);
    const hid_t id = f.get();
    if (h5::attr_string(id, io::schema::kSchema) != kExactSchema ||
        h5::attr_int64(id, io::schema::kVersion) != kExactVersion ||
        h5::attr_int64(id, io::schema::kComplete) != 1 ||
        h5::attr_int64(id, key::kPrefill) != prefill || h5::attr_int64(id, key::kSteps) != steps)
      return false;
    c.prefill = prefill;
    c.steps = steps;
    c.out = h5::read<double>(id, key::kExactOut, steps * c.heads * c.head_dim);
    c.lse = h5::read<double>(id, key::kExactLse, steps * c.heads);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// ---------------------------------------------------------------------------------
// Derived tables.
// ---------------------------------------------------------------------------------

namespace {

/*! The columns of a table: the configuration's (config_cells' order), then the table's own. */
template <size_t N>
std::vector<std::string> table_columns(const char* const (&own)[N]) {
  std::vector<std::string> c(std::begin(key::tables::kConfigColumns),
                             std::end(key::tables::kConfigColumns));
  c.insert(c.end(), std::begin(own), std::end(own));
  return c;
}

std::vector<Cell> config_cells(const RunSpec& s) {
  return {s.hash(),
          fs::path(s.trace).filename().string(),
          fmt(s.layer),
          fmt(s.params.tau),
          fmt(s.params.ring),
          fmt(s.params.tail),
          fmt(s.params.sinks),
          to_string(s.variant),
          to_string(s.storage),
          mac::to_string(s.precision)};
}

template <typename T>
std::vector<T> cat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

double q(const std::vector<double>& v, double p) { return tools::quantile(v, p); }

/*! Buckets [lo, hi): depth 0, 1, 2, 3, then powers of two. */
std::pair<int64_t, int64_t> depth_bucket(int64_t d) {
  if (d < 4) return {d, d + 1};
  int64_t lo = 4;
  while (lo * 2 <= d) lo *= 2;
  return {lo, lo * 2};
}

/*! Lag buckets [lo, hi): powers of two. */
std::pair<int64_t, int64_t> lag_bucket(int64_t lag) {
  int64_t lo = 1;
  while (lo * 2 <= lag) lo *= 2;
  return {lo, lo * 2};
}

double frac_holds(const std::vector<double>& err, const std::vector<double>& bound) {
  int64_t n = 0, ok = 0;
  for (size_t i = 0; i < err.size(); ++i) {
    if (std::isnan(bound[i])) continue;
    ++n;
    ok += err[i] <= bound[i];
  }
  return n ? static_cast<double>(ok) / static_cast<double>(n) : kNaN;
}

std::vector<double> ratios(const std::vector<double>& err, const std::vector<double>& bound) {
  std::vector<double> r;
  for (size_t i = 0; i < err.size(); ++i)
    if (!std::isnan(bound[i]))
      r.push_back(bound[i] > 0 ? err[i] / bound[i] : (err[i] > 0 ? HUGE_VAL : 0.0));
  return r;
}

/*! Identity of a run without one field, to pair runs differing only in it. */
std::string pair_key(const RunSpec& s, const std::string& without) {
  RunSpec t = s;
  if (without == "variant") t.variant = Variant::kSplit;
  if (without == "storage") t.storage = StateStorage::kFull;
  return t.key();
}

}  // namespace

void write_tables(const std::string& out_dir, const std::vector<RunResult>& runs) {
  Table t_runs, t_depth, t_lag, t_tau, t_hist, t_pairs;
  namespace tab = key::tables;
  t_runs.columns = table_columns(tab::kRunsColumns);
  t_depth.columns = table_columns(tab::kErrorVsDepthColumns);
  t_lag.columns = table_columns(tab::kErrorVsLagColumns);
  t_tau.columns = table_columns(tab::kHitRateColumns);
  t_hist.columns = table_columns(tab::kBoundHistColumns);
  t_pairs.columns = table_columns(tab::kPairsColumns);

  for (const auto& r : runs) {
    const auto cc = config_cells(r.spec);
    const size_t n = r.hit.size();
    std::vector<double> hit_err, lag_hits, dep_hits, b_err, b_rig, b_pap;
    int64_t dmax = 0;
    for (size_t k = 0; k < n; ++k) {
      dmax = std::max(dmax, r.depth[k]);
      if (!r.hit[k]) continue;
      hit_err.push_back(r.rel_l2[k]);
      lag_hits.push_back(static_cast<double>(r.lag[k]));
      dep_hits.push_back(static_cast<double>(r.depth[k]));
      if (!std::isnan(r.bound[k])) {
        b_err.push_back(r.abs_l2[k]);
        b_rig.push_back(r.bound[k]);
        b_pap.push_back(r.bound_paper[k]);
      }
    }
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? kNaN : s / static_cast<double>(v.size());
    };
    const auto rr = ratios(b_err, b_rig), rp = ratios(b_err, b_pap);
    double max_abs = 0, max_lse = 0;
    for (size_t k = 0; k < n; ++k) {
      max_abs = std::max(max_abs, r.max_abs[k]);
      max_lse = std::max(max_lse, r.lse_err[k]);
    }
    t_runs.add(cat(cc, {r.spec.source,
                        fmt(r.spec.params.gen_min),
                        fmt(r.spec.prefill),
                        fmt(r.steps),
                        fmt(r.heads),
                        fmt(r.hit_rate()),
                        fmt(r.kv_fraction()),
                        fmt(q(r.rel_l2, 0.5)),
                        fmt(q(r.rel_l2, 0.9)),
                        fmt(q(r.rel_l2, 0.99)),
                        fmt(q(r.rel_l2, 1.0)),
                        fmt(q(hit_err, 0.5)),
                        fmt(q(hit_err, 0.99)),
                        fmt(q(hit_err, 1.0)),
                        fmt(max_abs),
                        fmt(max_lse),
                        fmt(dmax),
                        fmt(mean(dep_hits)),
                        fmt(mean(lag_hits)),
                        fmt(static_cast<int64_t>(b_err.size())),
                        fmt(frac_holds(b_err, b_rig)),
                        fmt(q(rr, 0.5)),
                        fmt(q(rr, 0.99)),
                        fmt(q(rr, 1.0)),
                        fmt(frac_holds(b_err, b_pap)),
                        fmt(q(rp, 0.5)),
                        fmt(q(rp, 0.99)),
                        fmt(q(rp, 1.0)),
                        fmt(r.seconds),
                        fmt(r.cpu_seconds),
                        fmt(r.bound_cpu_seconds)}));

    // Error against chain depth (all steps; depth 0 = miss).
    std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_depth;
    for (size_t k = 0; k < n; ++k) by_depth[depth_bucket(r.depth[k])].push_back(k);
    for (const auto& [b, idx] : by_depth) {
      std::vector<double> e, ea, br, bp;
      for (auto k : idx) {
        e.push_back(r.rel_l2[k]);
        if (!std::isnan(r.bound[k])) {
          ea.push_back(r.abs_l2[k]);
          br.push_back(r.bound[k]);
          bp.push_back(r.bound_paper[k]);
        }
      }
      t_depth.add(cat(cc, {fmt(b.first), fmt(b.second), fmt(static_cast<int64_t>(e.size())),
                           fmt(q(e, 0.5)), fmt(q(e, 0.9)), fmt(q(e, 0.99)), fmt(q(e, 1.0)),
                           fmt(frac_holds(ea, br)), fmt(frac_holds(ea, bp))}));
    }
    // Error against lag (hits only).
    std::map<std::pair<int64_t, int64_t>, std::vector<double>> by_lag;
    for (size_t k = 0; k < n; ++k)
      if (r.hit[k]) by_lag[lag_bucket(r.lag[k])].push_back(r.rel_l2[k]);
    for (const auto& [b, e] : by_lag)
      t_lag.add(cat(cc, {fmt(b.first), fmt(b.second), fmt(static_cast<int64_t>(e.size())),
                         fmt(q(e, 0.5)), fmt(q(e, 0.9)), fmt(q(e, 0.99)), fmt(q(e, 1.0))}));
    // Hit rate and KV fraction per head and overall.
    for (int64_t h = -1; h < r.heads; ++h) {
      double hits = 0, cnt = 0, read = 0, full = 0;
      std::vector<double> e;
      for (int64_t i = 0; i < r.steps; ++i)
        for (int64_t hh = 0; hh < r.heads; ++hh) {
          if (h >= 0 && hh != h) continue;
          const auto k = static_cast<size_t>(i * r.heads + hh);
          hits += r.hit[k];
          cnt += 1;
          read += static_cast<double>(r.keys_read[k]);
          full += static_cast<double>(r.position[static_cast<size_t>(i)] + 1);
          e.push_back(r.rel_l2[k]);
        }
      t_tau.add(cat(cc, {h < 0 ? std::string("all") : fmt(h), fmt(hits / cnt), fmt(read / full),
                         fmt(q(e, 0.5)), fmt(q(e, 0.99))}));
    }
    // Histogram of log10(error / bound), both forms, 0.25-decade bins.
    for (const auto& [form, rat] :
         {std::pair<std::string, const std::vector<double>*>{"rigorous", &rr},
          std::pair<std::string, const std::vector<double>*>{"paper", &rp}}) {
      std::map<int64_t, int64_t> hist;
      for (double x : *rat) {
        const double l = x > 0 ? std::log10(x) : -12.0;
        const auto bin = static_cast<int64_t>(std::floor(std::clamp(l, -12.0, 12.0) * 4.0));
        ++hist[bin];
      }
      for (const auto& [bin, c] : hist)
        t_hist.add(cat(cc, {form, fmt(static_cast<double>(bin) / 4.0),
                            fmt(static_cast<double>(bin + 1) / 4.0), fmt(c)}));
    }
  }

  // Paired comparisons: split vs downdate, full vs production storage (same everything else).
  for (const std::string what : {"variant", "storage"}) {
    std::map<std::string, std::vector<const RunResult*>> groups;
    for (const auto& r : runs) groups[pair_key(r.spec, what)].push_back(&r);
    for (const auto& [key, g] : groups) {
      const RunResult *a = nullptr, *b = nullptr;
      for (auto* r : g) {
        if (what == "variant")
          (r->spec.variant == Variant::kSplit ? a : b) = r;
        else
          (r->spec.storage == StateStorage::kFull ? a : b) = r;
      }
      if (!a || !b || a->hit.size() != b->hit.size()) continue;
      std::vector<double> diff;
      double same = 0, worse = 0;
      for (size_t k = 0; k < a->hit.size(); ++k) {
        diff.push_back(std::abs(a->rel_l2[k] - b->rel_l2[k]));
        same += a->hit[k] == b->hit[k];
        worse += b->rel_l2[k] > a->rel_l2[k];
      }
      const double nn = static_cast<double>(a->hit.size());
      const std::string la =
          what == "variant" ? to_string(a->spec.variant) : to_string(a->spec.storage);
      const std::string lb =
          what == "variant" ? to_string(b->spec.variant) : to_string(b->spec.storage);
      t_pairs.add(cat(config_cells(a->spec),
                      {what, la, lb, fmt(q(a->rel_l2, 0.5)), fmt(q(a->rel_l2, 0.99)),
                       fmt(q(a->rel_l2, 1.0)), fmt(q(b->rel_l2, 0.5)), fmt(q(b->rel_l2, 0.99)),
                       fmt(q(b->rel_l2, 1.0)), fmt(q(diff, 0.5)), fmt(q(diff, 0.99)),
                       fmt(q(diff, 1.0)), fmt(same / nn), fmt(worse / nn)}));
    }
  }

  const std::vector<std::pair<std::string, const Table*>> tables = {
      {tab::kRuns, &t_runs},   {tab::kErrorVsDepth, &t_depth}, {tab::kErrorVsLag, &t_lag},
      {tab::kHitRate, &t_tau}, {tab::kBoundHist, &t_hist},     {tab::kPairs, &t_pairs}};
  for (const auto& [name, t] : tables)
    io::write_text_file((fs::path(out_dir) / (name + ".csv")).string(), t->csv());
  io::write_h5_atomically((fs::path(out_dir) / "study.h5").string(), [&](hid_t f) {
    h5::write_attr(f, io::schema::kSchema, std::string(io::schema::study::kTablesName));
    h5::write_attr(f, io::schema::kVersion, io::schema::study::kTablesVersion);
    h5::write_attr(f, key::kRuns, static_cast<int64_t>(runs.size()));
    h5::write_attr(f, io::schema::kGitCommit, std::string(MAC_GIT_COMMIT));
    for (const auto& [name, t] : tables) t->write_group(f, name);
  });
}

// ---------------------------------------------------------------------------------
// The sweep.
// ---------------------------------------------------------------------------------

namespace {
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

/*! One trace layer of a sweep and the runs planned on it, before its data is read (the
 *  runs' fingerprints are filled in when it is). */
struct LayerPlan {
  size_t trace = 0;  //!< index into the sweep's traces
  size_t index = 0;  //!< position of the layer in that trace's list of layers
  int64_t layer = 0, prefill = 0, steps = 0;
  std::vector<RunSpec> runs;
  std::vector<int64_t> shard;  //!< the shard of every run (deal_by_cost)
};

/*! Positions T of layer `l` of a trace file, from the shape of its q_pre (no data read). */
int64_t file_layer_tokens(const std::string& path, int64_t l) {
  namespace tr = io::schema::trace;
  const h5::Handle f = h5::open_file(path);
  const auto d = h5::open_dataset(
      f.get(), std::string(tr::kLayers) + "/" + std::to_string(l) + "/" + tr::kQPre);
  require(!d.dims.empty(), path, ": layer ", l, " q_pre has no positions");
  return static_cast<int64_t>(d.dims[0]);
}
}  // namespace

namespace {

/*! The outputs of a sweep: the tables in DIR, one file per run in runs/, the exact cache in
 *  exact/. Checked before anything is computed: the directories can be created and written,
 *  no table is an input trace, and the temporaries of killed earlier sweeps are removed. */
void prepare_output_dir(const SweepConfig& cfg) {
  const fs::path out(cfg.out_dir);
  for (const char* sub : {"runs", "exact"}) {
    std::error_code ec;
    fs::create_directories(out / sub, ec);
    require(!ec, "--out ", cfg.out_dir, ": cannot create directory '", (out / sub).string(), "' (",
            ec.message(), ")");
  }
  io::check_output((out / "study.h5").string(), "--out");
  io::check_output((out / "runs" / "run.h5").string(), "--out");
  io::check_output((out / "exact" / "exact.h5").string(), "--out");
  namespace tab = io::schema::study::tables;
  std::vector<std::string> tables = {"study.h5"};
  for (const char* t : tab::kAll) tables.push_back(std::string(t) + ".csv");
  for (const auto& table : tables)
    for (const auto& trace : cfg.traces) io::refuse_if_same_file((out / table).string(), {trace});
  for (const fs::path& dir : {out, out / "runs", out / "exact"})
    io::remove_stale_temporaries_in(dir.string());
}

}  // namespace

std::map<int64_t, double> parse_layer_tau(const std::vector<std::string>& entries) {
  std::map<int64_t, double> table;
  for (const auto& e : entries) {
    const auto eq = e.find('=');
    const std::string l = eq == std::string::npos ? "" : e.substr(0, eq);
    const std::string t = eq == std::string::npos ? "" : e.substr(eq + 1);
    char* end = nullptr;
    const double tau = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
    require(!l.empty() && l.size() <= 9 && l.find_first_not_of("0123456789") == std::string::npos &&
                !t.empty() && end == t.c_str() + t.size(),
            "--layer-tau '", e, "' is not L=tau (a layer index and a match margin, e.g. 3=0.8)");
    const int64_t layer = std::stoll(l);
    require(layer < kMaxLayers, "--layer-tau '", e, "': layer ", layer, " must be < ", kMaxLayers);
    require(tau >= 0.0 && tau < 1.0, "--layer-tau '", e, "': tau = ", tau, " must be in [0, 1)");
    require(table.emplace(layer, tau).second, "--layer-tau '", e, "': layer ", layer,
            " is given twice");
  }
  return table;
}

SweepReport run_sweep(const SweepConfig& cfg) {
  require(!cfg.out_dir.empty(), "no output directory (--out)");
  require(!cfg.taus.empty() && !cfg.rings.empty() && !cfg.tails.empty() && !cfg.sinks.empty() &&
              !cfg.variants.empty() && !cfg.storages.empty() && !cfg.precisions.empty(),
          "every sweep list needs at least one value");
  for (auto v : cfg.variants) parse_variant(v);
  for (auto v : cfg.storages) parse_state_storage(v);
  for (auto v : cfg.precisions) mac::parse_precision(v);
  for (double tau : cfg.taus)
    for (auto M : cfg.rings)
      for (auto r : cfg.tails)
        for (auto F : cfg.sinks) {
          MacParams p{tau, M, r, F, cfg.gen_min};
          p.depth_cap = cfg.depth_cap;
          p.refresh = cfg.refresh;
          p.validate();
        }
  for (auto l : cfg.layers)
    require(l >= 0 && l < kMaxLayers, "layer ", l, " must be >= 0 and < ", kMaxLayers);
  for (const auto& [l, tau] : cfg.layer_tau) {
    require(l >= 0 && l < kMaxLayers && tau >= 0.0 && tau < 1.0, "--layer-tau ", l, "=", tau,
            ": layer must be in [0, ", kMaxLayers, ") and tau in [0, 1)");
    require(cfg.layers.empty() ||
                std::find(cfg.layers.begin(), cfg.layers.end(), l) != cfg.layers.end(),
            "--layer-tau names layer ", l, ", which --layers does not select");
  }
  // −1 is "unset" (tokens / 2); any other value is the prompt length itself.
  require(cfg.prefill == -1 || (cfg.prefill >= 1 && cfg.prefill <= kMaxTokens),
          "prefill P = ", cfg.prefill, " must be >= 1 and <= ", kMaxTokens);
  require(cfg.steps >= 0 && cfg.steps <= kMaxTokens, "steps = ", cfg.steps,
          " must be >= 0 and <= ", kMaxTokens);
  require(cfg.threads >= 0 && cfg.threads <= kMaxThreads, "threads = ", cfg.threads,
          " must be >= 0 and <= ", kMaxThreads);
  require(cfg.shard_count >= 1 && cfg.shard_index >= 0 && cfg.shard_index < cfg.shard_count,
          "shard ", cfg.shard_index, "/", cfg.shard_count, " needs 0 <= k < N");
  require(cfg.merge_shards >= 0, "merge of ", cfg.merge_shards, " shards");
  require(cfg.merge_shards == 0 || cfg.shard_count == 1,
          "--merge checks every shard's runs; it takes no --shard (got --shard ", cfg.shard_index,
          "/", cfg.shard_count, ")");
  const bool merging = cfg.merge_shards > 0;
  if (merging) {
    require(fs::is_directory(fs::path(cfg.out_dir) / "runs"), "--merge: ", cfg.out_dir,
            "/runs is not a directory: run the shards into --out ", cfg.out_dir, " first");
  } else {
    prepare_output_dir(cfg);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  SweepReport rep;
  rep.threads = cfg.threads > 0 ? cfg.threads : omp_get_max_threads();

  // The plan: every run of the sweep, from the configuration and the traces' shapes only.
  std::vector<std::string> traces = cfg.traces;
  if (traces.empty()) traces.push_back("");
  std::vector<ref::Trace> loaded_traces(traces.size());  // the synthetic one's layers, or meta
  std::vector<LayerPlan> plan;
  for (size_t ti = 0; ti < traces.size(); ++ti) {
    const auto& path = traces[ti];
    ref::Trace& trace = loaded_traces[ti];
    std::string trace_name = path;
    if (path.empty()) {
      ref::SynthParams sp;
      sp.tokens = cfg.synth_tokens;
      sp.num_layers = cfg.synth_layers;
      sp.seed = cfg.synth_seed;
      sp.validate();
      if (cfg.progress)
        std::fprintf(stderr, "generating the embedded synthetic trace (%lld tokens, %lld layers)\n",
                     static_cast<long long>(sp.tokens), static_cast<long long>(sp.num_layers));
      trace = ref::generate_synthetic_trace(sp);
      trace_name = "(embedded synthetic)";
      if (!cfg.layers.empty()) {
        std::vector<ref::LayerData> keep;
        for (auto l : cfg.layers) {
          require(l >= 0 && l < trace.meta.num_layers, "layer ", l, " is outside [0, ",
                  trace.meta.num_layers, ")");
          keep.push_back(trace.layers[static_cast<size_t>(l)]);
        }
        trace.layers = std::move(keep);
      }
    } else {
      // Layers of a file are read one at a time (a full real trace is hundreds of MB).
      trace.meta = io::read_trace_meta(path);
      for (auto l : cfg.layers)
        require(l >= 0 && l < trace.meta.num_layers, "layer ", l, " is outside [0, ",
                trace.meta.num_layers, ") of ", path);
    }
    std::vector<int64_t> layer_ids = cfg.layers;
    if (layer_ids.empty())
      for (int64_t l = 0; l < trace.meta.num_layers; ++l) layer_ids.push_back(l);

    for (size_t li = 0; li < layer_ids.size(); ++li) {
      const int64_t tokens =
          path.empty() ? trace.layers[li].tokens : file_layer_tokens(path, layer_ids[li]);
      const int64_t P = cfg.prefill >= 0 ? cfg.prefill : tokens / 2;
      require(P >= 1 && P < tokens, "prefill P = ", P, " must be in [1, ", tokens - 1, "] for ",
              trace_name);
      const int64_t S = cfg.steps > 0 ? cfg.steps : tokens - P;
      require(P + S <= tokens, "prefill ", P, " + steps ", S, " runs past the ", tokens,
              " tokens of ", trace_name);
      LayerPlan lp;
      lp.trace = ti;
      lp.index = li;
      lp.layer = layer_ids[li];
      lp.prefill = P;
      lp.steps = S;
      const auto own_tau = cfg.layer_tau.find(layer_ids[li]);
      const std::vector<double> taus =
          own_tau == cfg.layer_tau.end() ? cfg.taus : std::vector<double>{own_tau->second};
      for (double tau : taus)
        for (auto M : cfg.rings)
          for (auto r : cfg.tails)
            for (auto F : cfg.sinks)
              for (const auto& var : cfg.variants)
                for (const auto& sto : cfg.storages)
                  for (const auto& pre : cfg.precisions) {
                    RunSpec s;
                    s.trace = trace_name;
                    s.source = trace.meta.source;
                    s.layer = layer_ids[li];
                    s.params = MacParams{tau, M, r, F, cfg.gen_min};
                    s.params.depth_cap = cfg.depth_cap;
                    s.params.refresh = cfg.refresh;
                    s.variant = parse_variant(var);
                    s.storage = parse_state_storage(sto);
                    s.precision = mac::parse_precision(pre);
                    s.prefill = P;
                    s.steps = S;
                    s.bound = cfg.bound;
                    lp.runs.push_back(s);
                  }
      plan.push_back(std::move(lp));
    }
  }

  // The shards: every run of the plan dealt to one of N by its estimated cost.
  const int64_t shards = merging ? cfg.merge_shards : cfg.shard_count;
  {
    std::vector<double> cost;
    for (const auto& lp : plan)
      for (const auto& s : lp.runs)
        cost.push_back(
            run_cost(s.steps, loaded_traces[lp.trace].meta.num_q_heads, s.params.ring, s.prefill));
    const auto dealt = deal_by_cost(cost, shards);
    size_t i = 0;
    for (auto& lp : plan) {
      lp.shard.assign(dealt.begin() + static_cast<std::ptrdiff_t>(i),
                      dealt.begin() + static_cast<std::ptrdiff_t>(i + lp.runs.size()));
      i += lp.runs.size();
      rep.planned += static_cast<int64_t>(lp.runs.size());
    }
  }
  std::map<int64_t, std::vector<std::string>> missing;  // --merge: shard → hashes missing

  for (auto& lp : plan) {
    const auto& path = traces[lp.trace];
    const auto& trace = loaded_traces[lp.trace];
    const auto mine = merging ? static_cast<int64_t>(lp.runs.size())
                              : std::count(lp.shard.begin(), lp.shard.end(), cfg.shard_index);
    rep.in_shard += mine;
    if (mine == 0) continue;  // no run of this shard on this layer: its data is not read
    ref::LayerData loaded;
    if (!path.empty()) loaded = io::read_trace_layer(path, lp.layer);
    const auto& L = path.empty() ? trace.layers[lp.index] : loaded;
    const double scale = trace.meta.softmax_scale;
    const int64_t P = lp.prefill, S = lp.steps;
    const std::string fp = layer_fingerprint(L, P + S);
    std::vector<RunSpec> pending;
    for (size_t i = 0; i < lp.runs.size(); ++i) {
      RunSpec s = lp.runs[i];
      if (!merging && lp.shard[i] != cfg.shard_index) continue;
      s.fingerprint = fp;
      if (run_complete(run_path(cfg.out_dir, s), s)) {
        rep.skipped.push_back(s.hash());
      } else if (merging) {
        missing[lp.shard[i]].push_back(s.hash());
      } else {
        pending.push_back(s);
      }
    }
    if (pending.empty()) continue;

    // Exact full attention, once per layer and step, shared by every run (and kept on disk).
    const auto te = std::chrono::steady_clock::now();
    const double ce = cpu_seconds();
    ExactCache exact;
    exact.heads = L.num_q_heads;
    exact.head_dim = L.head_dim;
    const auto ep = (fs::path(cfg.out_dir) / "exact" /
                     (fp + "_L" + std::to_string(lp.layer) + "_P" + std::to_string(P) + "_S" +
                      std::to_string(S) + ".h5"))
                        .string();
    if (read_exact(ep, P, S, exact)) {
      exact.fill_v_norms(L);
    } else {
      if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
      exact = ExactCache::compute(L, scale, P, S, cfg.progress,
                                  "exact full attention, layer " + std::to_string(lp.layer));
      // Shards of an array may compute one layer's cache at the same time, on hosts whose
      // pids can coincide: each writes a file of its own (whole) and renames it onto the name.
      const auto own = cfg.shard_count > 1 ? ep + ".shard" + std::to_string(cfg.shard_index) : ep;
      write_exact(own, exact);
      if (own != ep) fs::rename(own, ep);
    }
    rep.exact_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - te).count();
    rep.exact_cpu_seconds += cpu_seconds() - ce;

    int64_t total = 0, done = 0;
    for (const auto& s : pending) total += s.steps;
    tools::Progress prog(
        "layer " + std::to_string(lp.layer) + ": " + std::to_string(pending.size()) + " runs",
        total, 5.0, cfg.progress);
    auto report = [&](int64_t k) {
#pragma omp critical(mac_study_progress)
      {
        done += k;
        prog.update(done);
      }
    };
    const int threads = rep.threads;
    const auto n = static_cast<int64_t>(pending.size());
    std::vector<std::exception_ptr> errors(pending.size());
    if (n >= threads && threads > 1) {
      // Parallel over runs; the stepper's own parallel region over heads runs on one thread.
      omp_set_max_active_levels(1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
      for (int64_t i = 0; i < n; ++i) {
        try {
          const auto res = execute_run(L, scale, pending[static_cast<size_t>(i)], exact, report);
          write_run(run_path(cfg.out_dir, res.spec), res);
#pragma omp atomic
          rep.runs_cpu_seconds += res.cpu_seconds;
        } catch (...) {  // rethrown below, outside the parallel region, with its type
          errors[static_cast<size_t>(i)] = std::current_exception();
        }
      }
    } else {
      // Fewer runs than threads: one run at a time, the stepper parallel over heads.
      omp_set_max_active_levels(2);
      omp_set_num_threads(threads);
      for (int64_t i = 0; i < n; ++i) {
        const auto res = execute_run(L, scale, pending[static_cast<size_t>(i)], exact, report);
        write_run(run_path(cfg.out_dir, res.spec), res);
        rep.runs_cpu_seconds += res.cpu_seconds;  // the calling thread's share only
      }
    }
    prog.finish();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (const auto& s : pending) rep.computed.push_back(s.hash());
  }

  if (!missing.empty()) {
    std::string which;
    int64_t count = 0;
    for (const auto& [k, hashes] : missing) {
      which += msg(which.empty() ? "" : ", ", "shard ", k, "/", shards, " (", hashes.size(),
                   hashes.size() == 1 ? " run" : " runs", ", first ", hashes.front(), ")");
      count += static_cast<int64_t>(hashes.size());
    }
    require(
        false, "--merge: ", count, " of the sweep's ", rep.planned,
        " runs have no complete file in ", cfg.out_dir, "/runs: ", which,
        "; rerun those shards (--shard k/N, the same options and --out) first; no table written");
  }
  if (cfg.shard_count >
      1) {  // a shard's tables would cover part of the sweep: the merge writes them
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.cpu_seconds = cpu_seconds() - c0;
    return rep;
  }

  // The tables cover every complete run file in DIR/runs, so sweeps run one after another
  // into the same directory accumulate (incomplete files are left for a later resume).
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(cfg.out_dir) / "runs"))
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  std::vector<RunResult> results;
  for (const auto& p : files) {
    try {
      results.push_back(read_run(p));
    } catch (const InputError& e) {
      if (cfg.progress)
        std::fprintf(stderr, "mac-study: skipping %s in the tables: %s\n", p.c_str(), e.what());
    }
  }
  std::sort(results.begin(), results.end(), [](const RunResult& a, const RunResult& b) {
    const auto ka = std::make_tuple(
        a.spec.trace, a.spec.layer, a.spec.params.tau, a.spec.params.ring, a.spec.params.tail,
        a.spec.params.sinks, std::string(to_string(a.spec.variant)),
        std::string(to_string(a.spec.storage)), std::string(mac::to_string(a.spec.precision)));
    const auto kb = std::make_tuple(
        b.spec.trace, b.spec.layer, b.spec.params.tau, b.spec.params.ring, b.spec.params.tail,
        b.spec.params.sinks, std::string(to_string(b.spec.variant)),
        std::string(to_string(b.spec.storage)), std::string(mac::to_string(b.spec.precision)));
    return ka < kb;
  });
  write_tables(cfg.out_dir, results);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.cpu_seconds = cpu_seconds() - c0;
  return rep;
}

}  // namespace mac::study
