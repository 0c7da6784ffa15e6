/*! \file synth.cpp
 *  \brief Seeded synthetic trace generator (model: docs/synthetic-traces.md).
 *
 *  Random numbers come from std::mt19937_64 (its output sequence is fixed by the C++
 *  standard) turned into uniforms and Box–Muller normals here, not by
 *  std::normal_distribution, whose algorithm differs between standard libraries (polar
 *  method here; the context walk uses unit-variance uniforms, cheaper and, summed over
 *  steps, just as Gaussian). Each
 *  (layer, head) has its own engine seeded from (seed, layer, head), so the output does
 *  not depend on the number of OpenMP threads.
 */
#include "mac/ref/synth.hpp"

#include "mac/ref/bf16.hpp"
#include "mac/ref/rope.hpp"  // RopeStyle; pass 3 mirrors apply_rope

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>
#include <vector>

namespace mac::ref {
namespace {

/*! \brief SynthParams::calibrated()'s tilt (docs/synthetic-traces.md, "Calibration"). */
constexpr double kCalibratedTilt = 4.0;

/*! \brief splitmix64 finaliser: decorrelates nearby seeds. */
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/*! \brief Engine seed of one stream: kind 0 = per-layer means, 1 = query head, 2 = KV head. */
uint64_t stream_seed(uint64_t seed, int64_t layer, int64_t kind, int64_t index) {
  uint64_t s = mix64(seed);
  s = mix64(s ^ static_cast<uint64_t>(layer));
  s = mix64(s ^ static_cast<uint64_t>(kind));
  return mix64(s ^ static_cast<uint64_t>(index));
}

/*! \brief Uniforms and standard normals from one mt19937_64 (Box–Muller, pairs cached). */
class Rng {
 public:
  explicit Rng(uint64_t seed) : eng_(seed) {}
  /*! \brief Uniform in [0, 1), 53 bits. */
  double uniform() { return static_cast<double>(eng_() >> 11) * 0x1.0p-53; }
  /*! \brief Uniform with mean 0 and variance 1, i.e. on [−√3, √3), from 32 random
   *  bits: cheap innovations for the context walk. */
  double unit_uniform() { return 1.7320508075688772 * symmetric32(next32()); }
  /*! \brief Standard normal (Marsaglia's polar method: no trigonometry; the point in the
   *  square takes 32 bits per coordinate, one engine draw per attempt). */
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double x, y, r2;
    do {
      const uint64_t w = eng_();
      x = symmetric32(static_cast<uint32_t>(w >> 32));
      y = symmetric32(static_cast<uint32_t>(w));
      r2 = x * x + y * y;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = std::sqrt(-2.0 * std::log(r2) / r2);
    spare_ = y * f;
    have_spare_ = true;
    return x * f;
  }

 private:
  /*! \brief Maps 32 bits to the midpoint grid of (−1, 1): never exactly 0 or ±1. */
  static double symmetric32(uint32_t b) { return (static_cast<double>(b) + 0.5) * 0x1.0p-31 - 1.0; }
  /*! \brief 32 random bits: both halves of each 64-bit draw are used. */
  uint32_t next32() {
    if (have_half_) {
      have_half_ = false;
      return half_;
    }
    const uint64_t w = eng_();
    half_ = static_cast<uint32_t>(w);
    have_half_ = true;
    return static_cast<uint32_t>(w >> 32);
  }

  std::mt19937_64 eng_;
  uint32_t half_ = 0;
  bool have_half_ = false;
  double spare_ = 0;
  bool have_spare_ = false;
};

/*! \brief Shortest decimal that reads back to exactly x (so `source` reproduces the trace). */
std::string num(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0; }
bool probability(double x) { return std::isfinite(x) && x >= 0 && x <= 1; }

}  // namespace

void SynthParams::validate() const {
  require(tokens >= 1 && tokens <= kMaxTokens, "synthetic tokens = ", tokens,
          " must be >= 1 and <= ", kMaxTokens);
  require(num_layers >= 1 && num_layers <= kMaxLayers, "synthetic num_layers = ", num_layers,
          " must be >= 1 and <= ", kMaxLayers);
  require(num_kv_heads >= 1 && num_kv_heads <= kMaxHeads, "synthetic num_kv_heads = ", num_kv_heads,
          " must be >= 1 and <= ", kMaxHeads);
  require(num_q_heads >= 1 && num_q_heads <= kMaxHeads && num_q_heads % num_kv_heads == 0,
          "synthetic num_q_heads = ", num_q_heads,
          " must be a positive multiple of num_kv_heads = ", num_kv_heads, " and <= ", kMaxHeads);
  require(supported_head_dim(head_dim), "synthetic head_dim = ", head_dim,
          " is not supported (64, 128 or 256)");
  // The whole trace is held in memory: its query arrays (the largest) bound it.
  checked_product("synthetic trace queries [layers, T, Hq, D]",
                  {num_layers, tokens, num_q_heads, head_dim});
  require(std::isfinite(rope_theta) && rope_theta > 0, "synthetic rope_theta = ", rope_theta,
          " must be finite and > 0");
  require(finite_nonneg(mean_scale), "synthetic mean_scale = ", mean_scale,
          " must be finite and >= 0");
  require(finite_nonneg(context_scale), "synthetic context_scale = ", context_scale,
          " must be finite and >= 0");
  require(probability(drift), "synthetic drift = ", drift, " must be in [0, 1]");
  require(finite_nonneg(noise_scale), "synthetic noise_scale = ", noise_scale,
          " must be finite and >= 0");
  require(probability(novelty_floor), "synthetic novelty_floor = ", novelty_floor,
          " must be in [0, 1]");
  require(std::isfinite(novelty_corr) && novelty_corr >= 0 && novelty_corr < 1,
          "synthetic novelty_corr = ", novelty_corr, " must be in [0, 1)");
  require(probability(jump_prob), "synthetic jump_prob = ", jump_prob, " must be in [0, 1]");
  require(probability(repeat_prob), "synthetic repeat_prob = ", repeat_prob, " must be in [0, 1]");
  require(finite_nonneg(repeat_noise), "synthetic repeat_noise = ", repeat_noise,
          " must be finite and >= 0");
  require(repeat_window >= 1, "synthetic repeat_window = ", repeat_window, " must be >= 1");
  require(std::isfinite(head_spread) && head_spread >= 0 && head_spread < 1,
          "synthetic head_spread = ", head_spread, " must be in [0, 1)");
  require(std::isfinite(key_query_corr), "synthetic key_query_corr = ", key_query_corr,
          " must be finite");
  require(finite_nonneg(key_noise), "synthetic key_noise = ", key_noise,
          " must be finite and >= 0");
  require(probability(attractor_prob), "synthetic attractor_prob = ", attractor_prob,
          " must be in [0, 1]");
  require(std::isfinite(attractor_gain), "synthetic attractor_gain = ", attractor_gain,
          " must be finite");
  require(std::isfinite(rope_tilt) && std::abs(rope_tilt) <= 20,
          "synthetic rope_tilt = ", rope_tilt, " must be in [-20, 20]");
}

std::string SynthParams::describe() const {
  // v1's string is kept exactly (the golden file's source attribute); v2 appends its field.
  const bool is_v2 = rope_tilt != 0;
  const std::string v2 = is_v2 ? msg(" rope_tilt=", num(rope_tilt)) : std::string();
  return msg(is_v2 ? "synthetic v2 seed=" : "synthetic v1 seed=", seed, " tokens=", tokens,
             " layers=", num_layers, " q_heads=", num_q_heads, " kv_heads=", num_kv_heads,
             " head_dim=", head_dim, " rope=", to_string(rope_style), "/", num(rope_theta),
             " mean_scale=", num(mean_scale), " context_scale=", num(context_scale),
             " drift=", num(drift), " noise_scale=", num(noise_scale),
             " novelty_floor=", num(novelty_floor), " novelty_corr=", num(novelty_corr),
             " jump_prob=", num(jump_prob), " repeat_prob=", num(repeat_prob),
             " repeat_noise=", num(repeat_noise), " repeat_window=", repeat_window,
             " head_spread=", num(head_spread), " key_query_corr=", num(key_query_corr),
             " key_noise=", num(key_noise), " attractor_prob=", num(attractor_prob),
             " attractor_gain=", num(attractor_gain), v2);
}

SynthParams SynthParams::calibrated() {
  SynthParams p;
  p.rope_tilt = kCalibratedTilt;
  return p;
}

Trace generate_synthetic_trace(const SynthParams& p) {
  p.validate();
  const int64_t T = p.tokens, Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t G = Hq / Hkv;

  Trace trace;
  trace.meta.head_dim = D;
  trace.meta.num_q_heads = Hq;
  trace.meta.num_kv_heads = Hkv;
  trace.meta.num_layers = p.num_layers;
  trace.meta.softmax_scale = 1.0 / std::sqrt(static_cast<double>(D));
  trace.meta.rope_theta = p.rope_theta;
  trace.meta.rope_style = p.rope_style;
  trace.meta.source = p.describe();
  trace.layers.resize(static_cast<size_t>(p.num_layers));

  const double kInvSqrt2 = 0.70710678118654752440;
  // Per-dimension weights of the v2 tilt over RoPE pairs (pair i: dims i and i + D/2 for
  // neox, 2i and 2i+1 for gptj): the stable parts of q̃ and k̃ get tilt_i ∝ e^{γ·u_i}, the
  // per-token query noise tilt_inv_i ∝ e^{−γ·u_i}, u_i = i/(D/2−1), each normalised to mean
  // square 1 so that distances between queries, and so hit rates, stay about where v1 has
  // them. Exactly 1 for γ = 0 (v1, bit for bit).
  std::vector<double> tilt(static_cast<size_t>(D), 1.0), tilt_inv(tilt);
  if (p.rope_tilt != 0) {
    const int64_t half = D / 2;
    const auto u = [&](int64_t i) {
      return static_cast<double>(i) / static_cast<double>(half - 1);
    };
    double ms = 0, ms_inv = 0;
    for (int64_t i = 0; i < half; ++i) {
      ms += std::exp(2 * p.rope_tilt * u(i));
      ms_inv += std::exp(-2 * p.rope_tilt * u(i));
    }
    ms /= static_cast<double>(half);
    ms_inv /= static_cast<double>(half);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t i = p.rope_style == RopeStyle::kNeox ? d % half : d / 2;
      tilt[static_cast<size_t>(d)] = std::exp(p.rope_tilt * u(i)) / std::sqrt(ms);
      tilt_inv[static_cast<size_t>(d)] = std::exp(-p.rope_tilt * u(i)) / std::sqrt(ms_inv);
    }
  }
  for (int64_t l = 0; l < p.num_layers; ++l) {
    LayerData& L = trace.layers[static_cast<size_t>(l)];
    L.resize(T, Hq, Hkv, D);

    // Per-layer draws: the group's shared mean direction a_g, each head's own b_h and
    // its spread u_h. m_h = mean_scale·(a_g + b_h)/√2.
    std::vector<double> a(static_cast<size_t>(Hkv * D)), b(static_cast<size_t>(Hq * D));
    std::vector<double> u(static_cast<size_t>(Hq));
    {
      Rng rng(stream_seed(p.seed, l, 0, 0));
      for (auto& x : a) x = rng.normal();
      for (auto& x : b) x = rng.normal();
      for (auto& x : u) x = 2.0 * rng.uniform() - 1.0;
    }
    // Pass 1: pre-RoPE queries, one independent stream per query head.
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t h = 0; h < Hq; ++h) {
      Rng rng(stream_seed(p.seed, l, 1, h));
      const int64_t g = h / G;
      const double f = 1.0 + p.head_spread * u[static_cast<size_t>(h)];
      const double dr = std::min(1.0, p.drift * f);
      const double keep = std::sqrt(1.0 - dr * dr);
      const double sigma = p.noise_scale * f;
      const double phi = p.novelty_corr, phi_c = std::sqrt(1.0 - phi * phi);
      std::vector<double> m(static_cast<size_t>(D)), c(static_cast<size_t>(D));
      for (int64_t i = 0; i < D; ++i) {
        m[i] = p.mean_scale * (a[g * D + i] + b[h * D + i]) * kInvSqrt2;
        c[i] = p.context_scale * rng.normal();
      }
      double nov = rng.normal();  // log-novelty state, stationary N(0, 1)
      for (int64_t t = 0; t < T; ++t) {
        if (t > 0) {
          if (rng.uniform() < p.jump_prob) {
            for (auto& x : c) x = p.context_scale * rng.normal();
          } else {
            for (auto& x : c) x = keep * x + dr * p.context_scale * rng.unit_uniform();
          }
          nov = phi * nov + phi_c * rng.normal();
        }
        // ν uniform in [floor, 1]: Φ maps the N(0, 1) state to a uniform.
        const double nu =
            p.novelty_floor + (1.0 - p.novelty_floor) * 0.5 * std::erfc(-nov * kInvSqrt2);
        float* q = L.q_pre.data() + (t * Hq + h) * D;
        if (t > 0 && rng.uniform() < p.repeat_prob) {
          const int64_t w = std::min(t, p.repeat_window);
          const int64_t back =
              1 + std::min(w - 1, static_cast<int64_t>(rng.uniform() * static_cast<double>(w)));
          const float* src = L.q_pre.data() + ((t - back) * Hq + h) * D;
          for (int64_t i = 0; i < D; ++i)
            q[i] = round_bf16(
                static_cast<float>(src[i] + tilt_inv[i] * p.repeat_noise * rng.normal()));
        } else {
          for (int64_t i = 0; i < D; ++i) {
            // v2: the head mean on the slow pairs (aligned with the keys), what changes from
            // token to token (context, noise) on the fast ones.
            double x =
                tilt[i] * m[i] + tilt_inv[i] * c[i] + tilt_inv[i] * nu * sigma * rng.normal();
            q[i] = round_bf16(static_cast<float>(x));
          }
        }
      }
    }

    // Pass 2: pre-RoPE keys and values, one stream per KV head. Keys follow the mean
    // pre-RoPE query of their group (recency-peaked attention after RoPE); attractor
    // positions add the group's shared mean direction, which every head of the group
    // aligns with (large logits at any distance, like attention sinks).
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < Hkv; ++g) {
      Rng rng(stream_seed(p.seed, l, 2, g));
      for (int64_t t = 0; t < T; ++t) {
        const bool attractor = t == 0 || rng.uniform() < p.attractor_prob;
        float* k = L.k.data() + (t * Hkv + g) * D;
        float* v = L.v.data() + (t * Hkv + g) * D;
        for (int64_t i = 0; i < D; ++i) {
          double qm = 0;
          for (int64_t j = 0; j < G; ++j) qm += L.q_pre[(t * Hq + g * G + j) * D + i];
          // The group's queries are already tilted; the key's own parts are stable ones.
          double x =
              p.key_query_corr * qm / static_cast<double>(G) + tilt[i] * p.key_noise * rng.normal();
          if (attractor) x += tilt[i] * p.attractor_gain * a[g * D + i];
          k[i] = round_bf16(static_cast<float>(x));
        }
        for (int64_t i = 0; i < D; ++i) v[i] = round_bf16(static_cast<float>(rng.normal()));
      }
    }

    // Pass 3: RoPE of the BF16 pre-RoPE values, rounded again (keys in place). The
    // angles of one position are shared by all heads, so they are computed once per
    // position with exactly apply_rope's FP64 expressions (rope.hpp); test_io checks
    // q_post == bf16(apply_rope(q_pre)) bit for bit, which keeps the two in step.
    const int64_t half = D / 2;
    std::vector<double> inv_freq(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i)
      inv_freq[i] = std::pow(p.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
    const bool neox = p.rope_style == RopeStyle::kNeox;
#pragma omp parallel
    {
      std::vector<double> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
      auto rotate = [&](const float* x, float* out) {
        for (int64_t i = 0; i < half; ++i) {
          const int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
          const double a0 = x[ia], b0 = x[ib];
          out[ia] = round_bf16(static_cast<float>(a0 * cs[i] - b0 * sn[i]));
          out[ib] = round_bf16(static_cast<float>(a0 * sn[i] + b0 * cs[i]));
        }
      };
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < half; ++i) {
          const double ang = static_cast<double>(t) * inv_freq[i];
          cs[i] = std::cos(ang);
          sn[i] = std::sin(ang);
        }
        for (int64_t h = 0; h < Hq; ++h)
          rotate(L.q_pre.data() + (t * Hq + h) * D, L.q_post.data() + (t * Hq + h) * D);
        for (int64_t g = 0; g < Hkv; ++g) {
          float* k = L.k.data() + (t * Hkv + g) * D;
          rotate(k, k);
        }
      }
    }
  }
  return trace;
}

}  // namespace mac::ref
