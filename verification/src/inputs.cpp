#include "mac/verify/inputs.hpp"

#include "mac/ref/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

namespace mac::verify {
namespace {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(seed ^ splitmix64(stream + 0x632BE59BD9B4E019ull)) + index);
}

/*! Irwin–Hall: four 16-bit uniforms of one hash, centred and scaled to variance 1. */
inline float normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t h = hash3(seed, stream, index);
  double s = 0;
  for (int j = 0; j < 4; ++j) s += (static_cast<double>((h >> (16 * j)) & 0xFFFFu) + 0.5) / 65536.0;
  return static_cast<float>((s - 2.0) * 1.7320508075688772);
}

/*! A multiple of 1/8 in [−2, 2]: the threshold-edge distribution (sums of squares exact). */
inline float grid8(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(static_cast<int>(hash3(seed, stream, index) % 33) - 16) / 8.0f;
}

enum Stream : uint64_t {
  kK = 1,
  kV = 2,
  kQpost = 3,
  kQpre = 4,
  kPlant = 5,
  kNoise = 6,
  kDir = 7,
  kTie = 8
};

inline uint64_t stream(int request, Stream s) { return (static_cast<uint64_t>(request) << 8) | s; }

double special_value(const std::string& special, const char* prefix, double fallback) {
  const std::string p = prefix;
  if (special.compare(0, p.size(), p) != 0) return fallback;
  return std::strtod(special.c_str() + p.size(), nullptr);
}

/*! Lag of one plant from the case's lag list. */
int64_t pick_lag(const CaseSpec& c, double u1, double u2) {
  std::vector<std::string> opts;
  std::stringstream ss(c.lags);
  std::string t;
  while (std::getline(ss, t, ',')) opts.push_back(t);
  const std::string& o =
      opts[std::min(opts.size() - 1, static_cast<size_t>(u1 * static_cast<double>(opts.size())))];
  if (o == "u") return 1 + static_cast<int64_t>(u2 * static_cast<double>(c.M));
  if (o == "c") return 1 + static_cast<int64_t>(u2 * 4.0);
  if (o == "M") return c.M;
  if (o == "M-1") return c.M - 1;
  if (o == "r") return c.r;
  if (o == "r-1") return c.r - 1;
  if (o == "r+1") return c.r + 1;
  return std::atoll(o.c_str());
}

}  // namespace

CaseSpec with_nonce(const CaseSpec& spec, uint64_t nonce) {
  CaseSpec c = spec;
  if (nonce != 0) c.seed = splitmix64(spec.seed ^ splitmix64(nonce));
  return c;
}

uint64_t trial_nonce(uint64_t run_nonce, int trial) {
  if (trial == 0) return run_nonce;
  // A stream of its own (the constant spells "trial"), so trial nonces never coincide with a
  // seed mixed by with_nonce.
  const uint64_t n =
      splitmix64(run_nonce ^ splitmix64(0x747269616cull + static_cast<uint64_t>(trial)));
  return n == 0 ? 1 : n;
}

double uniform01(uint64_t seed, uint64_t s, uint64_t index) {
  return static_cast<double>(hash3(seed, s, index) >> 11) * 0x1.0p-53;
}

CaseInputs make_inputs(const CaseSpec& c) {
  c.validate();
  CaseInputs in;
  in.spec = c;
  in.params = c.params();
  in.scale = c.scale();
  const int Hq = c.Hq(), Hkv = c.Hkv, D = c.D;
  const uint64_t seed = c.seed;
  const bool thr_mode = c.special.compare(0, 4, "thr_") == 0;
  const double logit_scale = special_value(c.special, "logits:", 1.0);
  const double cancel_gap = special_value(c.special, "cancel:", 0.0);
  const double v_scale = special_value(c.special, "vscale:", 1.0);
  in.requests.resize(static_cast<size_t>(c.batch));

  for (int i = 0; i < c.batch; ++i) {
    auto& rq = in.requests[static_cast<size_t>(i)];
    rq.prompt = c.prompt(i);
    rq.ready = c.request_ready(i);
    const int64_t P = rq.prompt, T = P + c.steps;
    auto& L = rq.layer;
    L.resize(T, Hq, Hkv, D);
    const int64_t qlo = std::max<int64_t>(0, P - c.M);
    // Cancellation: a direction u per KV head; boosted keys in the last r tokens carry
    // all but about e^-g of every decode query's mass.
    std::vector<float> dir(static_cast<size_t>(Hkv) * D);
    for (size_t j = 0; j < dir.size(); ++j) dir[j] = normal(seed, stream(i, kDir), j);
    const int64_t boost_from = c.r > 0 ? std::max<int64_t>(0, T - c.r) : T;
    const float boost = static_cast<float>(cancel_gap / std::sqrt(static_cast<double>(D)));

#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      for (int hk = 0; hk < Hkv; ++hk) {
        const uint64_t base = (static_cast<uint64_t>(t) * Hkv + hk) * D;
        float* k = L.k.data() + base;
        float* v = L.v.data() + base;
        for (int d = 0; d < D; ++d) {
          float kv = normal(seed, stream(i, kK), base + d);
          if (cancel_gap > 0)
            kv = 0.5f * kv + (t >= boost_from ? boost * dir[static_cast<size_t>(hk) * D + d] : 0.f);
          k[d] = ref::round_bf16(static_cast<float>(kv * logit_scale));
          v[d] =
              ref::round_bf16(static_cast<float>(normal(seed, stream(i, kV), base + d) * v_scale));
        }
      }
      if (t < qlo) continue;
      for (int h = 0; h < Hq; ++h) {
        const uint64_t base = (static_cast<uint64_t>(t) * Hq + h) * D;
        float* qp = L.q_post.data() + base;
        float* qr = L.q_pre.data() + base;
        for (int d = 0; d < D; ++d) {
          float q = normal(seed, stream(i, kQpost), base + d);
          if (cancel_gap > 0) q = dir[static_cast<size_t>(h / c.G) * D + d] + 0.5f * q;
          qp[d] = ref::round_bf16(static_cast<float>(q * logit_scale));
          qr[d] = thr_mode ? grid8(seed, stream(i, kQpre), base + d)
                           : ref::round_bf16(normal(seed, stream(i, kQpre), base + d));
        }
      }
    }

    // Planted hits, step by step (sequential: a plant may copy an earlier plant).
    rq.planted.assign(static_cast<size_t>(c.steps) * Hq, 0);
    const int nhit = static_cast<int>(std::lround(c.hit * Hq));
    std::vector<int> perm(static_cast<size_t>(Hq));
    for (int64_t s = 0; s < c.steps; ++s) {
      const int64_t m = P + s;
      std::iota(perm.begin(), perm.end(), 0);
      for (int j = Hq - 1; j > 0; --j) {
        const int k = static_cast<int>(
            uniform01(seed, stream(i, kPlant), static_cast<uint64_t>(s) * 1000 + j) * (j + 1));
        std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(std::min(k, j))]);
      }
      for (int n = 0; n < nhit; ++n) {
        const int h = perm[static_cast<size_t>(n)];
        const uint64_t key = (static_cast<uint64_t>(s) * Hq + h) * 8;
        int64_t lag = pick_lag(c, uniform01(seed, stream(i, kPlant), key + 1000000),
                               uniform01(seed, stream(i, kPlant), key + 1000001));
        lag = std::min<int64_t>(std::max<int64_t>(lag, 1), m);
        lag = std::min<int64_t>(lag, c.M);
        const int64_t p = m - lag;
        float* qm = L.q_pre.data() + (static_cast<size_t>(m) * Hq + h) * D;
        const float* qp = L.q_pre.data() + (static_cast<size_t>(p) * Hq + h) * D;
        rq.planted[static_cast<size_t>(s) * Hq + h] = 1;
        if (thr_mode) {
          // thr = D/2 (tau = 0.5). eq: D/2 dims differ by ±1 (d2 = thr exactly: a miss);
          // below: D/2 − 1 dims by ±1 and 3 by ±1/2 (d2 = thr − 1/4: a hit);
          // above: D/2 dims by ±1 and one by 1/8 (d2 = thr + 1/64: a miss). All exact.
          std::string mode = c.special.substr(4);
          if (mode == "mix") {
            const double u = uniform01(seed, stream(i, kTie), key + 7);
            mode = u < 1.0 / 3 ? "eq" : (u < 2.0 / 3 ? "below" : "above");
          }
          std::vector<float> delta(static_cast<size_t>(D), 0.f);
          std::vector<int> dims(static_cast<size_t>(D));
          std::iota(dims.begin(), dims.end(), 0);
          for (int j = D - 1; j > 0; --j) {
            const int k =
                static_cast<int>(uniform01(seed, stream(i, kTie), key * 512 + j) * (j + 1));
            std::swap(dims[static_cast<size_t>(j)], dims[static_cast<size_t>(std::min(k, j))]);
          }
          const int ones = mode == "below" ? D / 2 - 1 : D / 2;
          int n0 = 0;
          for (; n0 < ones; ++n0) delta[static_cast<size_t>(dims[static_cast<size_t>(n0)])] = 1.f;
          if (mode == "below")
            for (int j = 0; j < 3; ++j)
              delta[static_cast<size_t>(dims[static_cast<size_t>(n0 + j)])] = 0.5f;
          if (mode == "above") delta[static_cast<size_t>(dims[static_cast<size_t>(n0)])] = 0.125f;
          for (int d = 0; d < D; ++d) {
            const float sign = (hash3(seed, stream(i, kTie), key * 512 + 256 + d) & 1) ? 1.f : -1.f;
            qm[d] =
                qp[d] + sign * delta[static_cast<size_t>(d)];  // exact: multiples of 1/8 below 4
          }
          continue;
        }
        for (int d = 0; d < D; ++d)
          qm[d] = ref::round_bf16(qp[d] + 0.1f * normal(seed, stream(i, kNoise), key * 512 + d));
        if (c.special == "tie") {
          // A second candidate at a larger lag b with the identical q̃ as p: equal canonical
          // distances, and the older position (m − b) must win.
          const int64_t maxb = std::min<int64_t>(m, c.M);
          if (maxb > lag) {
            const int64_t b = lag + 1 +
                              static_cast<int64_t>(uniform01(seed, stream(i, kTie), key + 3) *
                                                   static_cast<double>(maxb - lag));
            float* qb = L.q_pre.data() + (static_cast<size_t>(m - std::min(b, maxb)) * Hq + h) * D;
            std::copy(qp, qp + D, qb);
          }
        }
      }
    }
  }
  return in;
}

}  // namespace mac::verify
