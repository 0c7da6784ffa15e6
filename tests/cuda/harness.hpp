#pragma once
// Test harness of the GPU suite: a batch of requests with BF16-rounded random streams, a
// paged KV pool (pages shuffled, poisoned with NaN where nothing was written), rings, and
// one mac::ref::DecodeStepper<double> per request (production storage, split variant) that
// defines the expected decisions, outputs and ring entries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mac/cuda/mac_cuda.hpp"
#include "mac/cuda/runner.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/ref/stepper.hpp"
#include "mac/verify/check.hpp"

namespace mac::cuda::test {

inline void check(const Status& s, const char* what) {
  if (!s.ok())
    throw std::runtime_error(std::string(what) + ": " + to_string(s.code) + ": " + s.message);
}
#define MAC_CHECK(expr) ::mac::cuda::test::check((expr), #expr)

/*! \brief The amend variant every case's engines use unless a case sets its own: the test
 *  binary's `--amend default|cpasync|bulk` (after Boost.Test's `--`), so one build runs the
 *  whole suite through either K/V copy path: `test_cuda -- --amend bulk`. */
AmendVariant suite_amend();

struct CaseSpec {
  int D = 128, G = 4, Hkv = 2, page_size = 16, M = 64, r = 32, F = 0, gen_min = 0, chunk = 0;
  double tau = 0.45;
  std::vector<int> prompt = {1037, 700, 900};  //!< P per request (≥ M)
  int steps = 8;
  uint64_t seed = 1;
  double repeat_prob = 0.6;     //!< chance a query repeats an earlier one (plus noise): hits
  std::vector<int> ready = {};  //!< per request; empty → all ready
  K3Mode k3 = K3Mode::kFused;
  bool pdl = true;  //!< EngineConfig::dependent_launch of the MAC engine; the full-attention
                    //!<  engine of the bit-identity check runs the other mode
  ScheduleMode schedule = ScheduleMode::kAuto;  //!< of the MAC engine; the full-attention
                                                //!<  engine runs the other one
  AmendVariant amend = suite_amend();           //!< both engines' K/V copies (the suite's --amend)
  Tuning tuning;                                //!< both engines' tuning fields
  std::string name() const {
    char b[240];
    std::snprintf(
        b, sizeof b,
        "D=%d G=%d Hkv=%d N=%zu ps=%d M=%d r=%d F=%d gen_min=%d pdl=%d sched=%s seed=%llu", D, G,
        Hkv, prompt.size(), page_size, M, r, F, gen_min, pdl ? 1 : 0,
        schedule == ScheduleMode::kAuto ? "auto" : "kernel", static_cast<unsigned long long>(seed));
    return b;
  }
};

/*! \brief A case of one step with CaseSpec's defaults and `seed`: the inputs of a step that a
 *  test runs its own way. */
inline CaseSpec one_step_case(uint64_t seed = 1) {
  CaseSpec c;
  c.steps = 1;
  c.seed = seed;
  return c;
}

inline uint16_t bits(float x) { return ref::bf16_bits(ref::round_bf16(x)); }

struct Stats {
  double max_rel_l2 = 0, max_abs = 0, max_lse = 0;
  double max_entry_rel_l2 = 0, max_entry_lse = 0;
  long decision_mismatch = 0, heads = 0, hits = 0, bit_mismatch = 0, bit_checked = 0, entries = 0;
  long all_hit_steps = 0;       //!< steps in which the reference hit on every head of every row
  long item_size_mismatch = 0;  //!< steps whose item size contradicts the reference's decisions
  long two_cut_steps = 0;  //!< steps whose eligible rows took another item size than the exact cut
  long unready_checked = 0;  //!< (row, head) steps of rows that are not ready
  long unready_writes = 0;   //!< of those, ring entries the step changed (K3 must not write)
  uint64_t out_hash =
      14695981039346656037ull;  //!< FNV-1a over every step's out and lse bits, MAC then full
};

/*! \brief FNV-1a of `n` bytes at `p`, continuing from `h`. */
inline uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

class Harness {
 public:
  explicit Harness(const CaseSpec& c) : c_(c), rng_(c.seed) {
    N_ = static_cast<int>(c.prompt.size());
    Hq_ = c.G * c.Hkv;
    D_ = c.D;
    R_ = 2 * N_;
    scale_ = 1.0 / std::sqrt(static_cast<double>(D_));
    std::normal_distribution<float> nd(0.f, 1.f);
    layers_.resize(N_);
    for (int i = 0; i < N_; ++i) {
      auto& L = layers_[i];
      const int T = c.prompt[i] + c.steps;
      L.resize(T, Hq_, c.Hkv, D_);
      for (auto& x : L.k) x = ref::round_bf16(nd(rng_));
      for (auto& x : L.v) x = ref::round_bf16(nd(rng_));
      for (auto& x : L.q_post) x = ref::round_bf16(nd(rng_));
      std::uniform_real_distribution<double> u(0, 1);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < Hq_; ++h) {
          float* q = L.q_pre.data() + (static_cast<size_t>(t) * Hq_ + h) * D_;
          const double pick = u(rng_);
          if (t > 0 && pick < c.repeat_prob) {
            // Repeat an earlier query: lag M now and then (the matched slot is the one the
            // step overwrites), else uniform 1..min(t, M).
            int lag =
                pick < 0.1 * c.repeat_prob ? c.M : 1 + static_cast<int>(u(rng_) * std::min(t, c.M));
            lag = std::min(lag, t);
            const float* src = L.q_pre.data() + (static_cast<size_t>(t - lag) * Hq_ + h) * D_;
            for (int d = 0; d < D_; ++d) q[d] = ref::round_bf16(src[d] + 0.25f * nd(rng_));
          } else {
            for (int d = 0; d < D_; ++d) q[d] = ref::round_bf16(nd(rng_));
          }
        }
    }
    // The case's layout: pages of all requests shuffled in one pool (the same generator,
    // after the streams), request i in slot 2i + 1 of 2N, not-ready rows through an epoch
    // mismatch (ready = 1).
    runner::CaseLayout lay;
    lay.num_q_heads = Hq_;
    lay.num_kv_heads = c.Hkv;
    lay.head_dim = D_;
    lay.page_size = c.page_size;
    lay.ring = c.M;
    for (int i = 0; i < N_; ++i) {
      const auto& L = layers_[i];
      lay.requests.push_back(
          {L.tokens, c.prompt[i], L.k.data(), L.v.data(), L.q_pre.data(), L.q_post.data()});
    }
    lay.shuffle_pages = [this](std::vector<int32_t>& perm) {
      std::shuffle(perm.begin(), perm.end(), rng_);
    };
    lay.num_slots = R_;
    for (int i = 0; i < N_; ++i) lay.slots.push_back((2 * i + 1) % R_);
    ready_host_.assign(N_, 1);
    for (size_t i = 0; i < c.ready.size() && i < ready_host_.size(); ++i)
      ready_host_[i] = c.ready[i];
    lay.ready.assign(R_, 1);
    lay.epoch_a.assign(R_, 7);
    lay.epoch_b.assign(R_, 7);
    for (int i = 0; i < N_; ++i)
      if (!ready_host_[i]) lay.epoch_b[lay.slots[i]] = 8;
    lay.softmax_scale = static_cast<float>(scale_);
    lay.tau = c.tau;
    lay.tail = c.r;
    lay.sinks = c.F;
    lay.gen_min = c.gen_min;

    EngineConfig ec;
    ec.max_batch = N_;
    ec.num_q_heads = Hq_;
    ec.num_kv_heads = c.Hkv;
    ec.head_dim = D_;
    ec.max_context = 0;
    for (int P : c.prompt) ec.max_context = std::max(ec.max_context, P + c.steps);
    ec.ring = c.M;
    ec.kv_chunk = c.chunk;
    ec.k3_mode = c.k3;
    ec.dependent_launch = c.pdl;
    ec.schedule = c.schedule;
    ec.amend = c.amend;
    ec.tuning = c.tuning;
    // The other launch mode and the other schedule, so the ineligible rows' bit-identity also
    // shows that launching the kernels as programmatic dependents, and scheduling the items in
    // the amend kernel instead of a schedule kernel, change no bit.
    EngineConfig ef = ec;
    ef.dependent_launch = !c.pdl;
    ef.schedule = c.schedule == ScheduleMode::kAuto ? ScheduleMode::kKernel : ScheduleMode::kAuto;
    MAC_CHECK(runner::CaseRunner::create(lay, ec, ef, &run_));

    mac::MacParams mp;
    mp.tau = c.tau;
    mp.ring = c.M;
    mp.tail = c.r;
    mp.sinks = c.F;
    mp.gen_min = c.gen_min;
    for (int i = 0; i < N_; ++i) {
      steppers_.push_back(std::make_unique<ref::DecodeStepper<double>>(layers_[i], scale_, mp));
      steppers_.back()->prefill(c.prompt[i]);
    }
    pos_.resize(N_);
    for (int i = 0; i < N_; ++i) pos_[i] = c.prompt[i];
  }

  DecodeParams params() const { return run_->params(); }

  /*! \brief Prefill ring entries of the last M prompt positions on the GPU (one call). */
  void prefill() {
    std::vector<int64_t> first(N_);
    for (int i = 0; i < N_; ++i) first[i] = c_.prompt[i] - c_.M;
    MAC_CHECK(run_->prefill(0, N_, c_.M, first));
  }

  /*! \brief prefill(), then upload_step(): the inputs of the first step in place. */
  void ready_first_step() {
    prefill();
    upload_step();
  }

  /*! \brief Uploads position pos_[i] of every request: its K/V token, queries, kv_len; keeps
   *  the ring slot the step may write of each row that is not ready, to show it unchanged. */
  void upload_step() {
    MAC_CHECK(run_->upload_step(pos_));
    before_.assign(N_, {});
    for (int i = 0; i < N_; ++i)
      if (!ready_host_[i]) MAC_CHECK(run_->read_ring_slot(i, pos_[i], &before_[i]));
  }

  /*! \brief One MAC step on the runner's stream, eager or from the graph captured at the
   *  first graph step. */
  void step(bool graph) { MAC_CHECK(run_->mac_step(graph)); }

  /*! \brief Compares the GPU step just run (positions pos_) with the reference steppers,
   *  runs full attention on the same inputs for the bit-identity check, then advances. */
  void check_step(Stats& st, bool verbose = false) {
    const auto tol = verify::Tolerances::gpu();
    MAC_CHECK(run_->full_attention());
    runner::StepReadback rb;
    MAC_CHECK(run_->read_step(&rb));
    const auto &out = rb.out, &outf = rb.out_full;
    const auto &lse = rb.lse, &lsef = rb.lse_full, &d2 = rb.d2;
    const auto& hit = rb.hit;
    const auto& mpos = rb.match_pos;
    st.out_hash = fnv1a(st.out_hash, out.data(), out.size() * 2);
    st.out_hash = fnv1a(st.out_hash, lse.data(), lse.size() * 4);
    st.out_hash = fnv1a(st.out_hash, outf.data(), outf.size() * 2);
    st.out_hash = fnv1a(st.out_hash, lsef.data(), lsef.size() * 4);

    bool all_hit = true;
    for (int i = 0; i < N_; ++i) {
      const int m = pos_[i];
      runner::RingSlot ring;  // slot m mod M of the row's request slot, written this step
      MAC_CHECK(run_->read_ring_slot(i, m, &ring));
      const auto res = steppers_[i]->step(m, ready_host_[i] != 0);
      if (!ready_host_[i])
        for (int h = 0; h < Hq_; ++h) {
          const auto& b = before_[i];
          bool same = std::memcmp(&ring.lse[h], &b.lse[h], 4) == 0;
          for (int d = 0; d < D_; ++d)
            same = same && ring.q_pre[h * D_ + d] == b.q_pre[h * D_ + d] &&
                   ring.o[h * D_ + d] == b.o[h * D_ + d];
          ++st.unready_checked;
          st.unready_writes += !same;
        }
      for (int h = 0; h < Hq_; ++h) {
        const size_t oh = static_cast<size_t>(i) * Hq_ + h;
        const auto& hs = res.heads[h];
        ++st.heads;
        st.hits += hs.hit;
        all_hit = all_hit && hs.hit;
        if ((hit[oh] != 0) != hs.hit || (hs.hit && mpos[oh] != hs.match_pos)) {
          ++st.decision_mismatch;
          std::printf(
              "[FAIL] decision row %d pos %d head %d: gpu hit %d p %lld d2 %.9g | ref hit %d p "
              "%lld d2 %.9g\n",
              i, m, h, hit[oh], static_cast<long long>(mpos[oh]), d2[oh], hs.hit,
              static_cast<long long>(hs.match_pos), hs.match.d2);
        }
        // Output vs the FP64 reference of the same decisions.
        double num = 0, den = 0;
        for (int d = 0; d < D_; ++d) {
          const double g = ref::bf16_from_bits(out[oh * D_ + d]), r = hs.out.o[d];
          num += (g - r) * (g - r);
          den += r * r;
          st.max_abs = std::max(st.max_abs, std::abs(g - r));
        }
        const double rel = std::sqrt(num / std::max(den, 1e-300));
        st.max_rel_l2 = std::max(st.max_rel_l2, std::isnan(rel) ? 1e9 : rel);
        const double dl = std::abs(static_cast<double>(lse[oh]) - hs.out.lse);
        st.max_lse = std::max(st.max_lse, std::isnan(dl) ? 1e9 : dl);
        if (verbose && rel > tol.out_rel_l2)
          std::printf("  row %d pos %d head %d hit %d rel %.3g lse %g vs %g\n", i, m, h, hs.hit,
                      rel, lse[oh], hs.out.lse);
        // Ineligible rows: bit-identical to full attention.
        if (!hs.eligible) {
          ++st.bit_checked;
          bool same = lse[oh] == lsef[oh] || (std::isnan(lse[oh]) && std::isnan(lsef[oh]));
          for (int d = 0; d < D_; ++d) same = same && out[oh * D_ + d] == outf[oh * D_ + d];
          if (!same) ++st.bit_mismatch;
        }
        // Ring entry written this step.
        if (hs.wrote_entry) {
          ++st.entries;
          const size_t re = static_cast<size_t>(h);
          const auto* e = steppers_[i]->ring().find(h, m);
          bool qok = true;
          for (int d = 0; d < D_; ++d)
            qok = qok &&
                  ring.q_pre[re * D_ + d] ==
                      ref::bf16_bits(layers_[i].q_pre[(static_cast<size_t>(m) * Hq_ + h) * D_ + d]);
          if (!qok) st.max_entry_rel_l2 = 1e9;
          if (e->state.is_empty()) {
            if (ring.lse[re] > -std::numeric_limits<float>::infinity()) st.max_entry_lse = 1e9;
          } else {
            double n2 = 0, d2s = 0;
            for (int d = 0; d < D_; ++d) {
              const double g = ref::bf16_from_bits(ring.o[re * D_ + d]), r = e->state.o[d];
              n2 += (g - r) * (g - r);
              d2s += r * r;
            }
            const double rel2 = std::sqrt(n2 / std::max(d2s, 1e-300));
            st.max_entry_rel_l2 = std::max(st.max_entry_rel_l2, std::isnan(rel2) ? 1e9 : rel2);
            const double dl2 = std::abs(static_cast<double>(ring.lse[re]) - e->state.lse);
            st.max_entry_lse = std::max(st.max_entry_lse, std::isnan(dl2) ? 1e9 : dl2);
          }
        }
      }
      ++pos_[i];
    }
    st.all_hit_steps += all_hit;
    last_all_hit_ = all_hit;
  }
  /*! \brief Whether the reference hit on every head of every row in the last checked step. */
  bool last_all_hit() const { return last_all_hit_; }

  Engine& engine() { return run_->engine(); }
  runner::CaseRunner& runner() { return *run_; }
  Engine& full_engine() { return run_->full_engine(); }
  /*! \brief The stream every copy and kernel of the case runs on. */
  void* stream() const { return run_->stream(); }
  int batch() const { return N_; }
  const CaseSpec& spec() const { return c_; }

 private:
  CaseSpec c_;
  std::mt19937_64 rng_;  //!< the case's streams, then its page order
  int N_ = 0, Hq_ = 0, D_ = 0, R_ = 0;
  double scale_ = 0;
  std::vector<ref::LayerData> layers_;
  std::vector<int> ready_host_;
  std::vector<int64_t> pos_;
  bool last_all_hit_ = false;
  std::vector<runner::RingSlot> before_;  //!< per row: its ring slot before the step
  std::unique_ptr<runner::CaseRunner> run_;
  std::vector<std::unique_ptr<ref::DecodeStepper<double>>> steppers_;
};

/*! \brief Whether `s` meets every limit a case must meet (the checks of check_stats).
 *  Tolerances' LSE limit is relative, |ΔL| ≤ lse·max(1, |L|); the suite holds the absolute
 *  |ΔL| to it, which is at least as strict since max(1, |L|) ≥ 1. */
inline bool stats_ok(const Stats& s) {
  const auto tol = verify::Tolerances::gpu();
  return s.decision_mismatch == 0 && s.max_rel_l2 <= tol.out_rel_l2 && s.bit_mismatch == 0 &&
         s.max_entry_rel_l2 <= tol.entry_rel_l2 && s.max_lse <= tol.lse &&
         s.max_entry_lse <= tol.entry_lse && s.item_size_mismatch == 0 && s.unready_writes == 0;
}

inline void report(const char* what, const CaseSpec& c, const Stats& s) {
  const bool ok = stats_ok(s);
  std::printf(
      "%s %s | %s: heads %ld hits %ld decision mismatches %ld | out rel-L2 max %.3e, max |err| "
      "%.3e, lse max "
      "|err| %.3e | entries %ld rel-L2 max %.3e lse max |err| %.3e | ineligible bit-identical "
      "%ld/%ld | all-hit "
      "steps %ld, item-size mismatches %ld | not-ready ring writes %ld/%ld\n",
      ok ? "[OK]" : "[FAIL]", what, c.name().c_str(), s.heads, s.hits, s.decision_mismatch,
      s.max_rel_l2, s.max_abs, s.max_lse, s.entries, s.max_entry_rel_l2, s.max_entry_lse,
      s.bit_checked - s.bit_mismatch, s.bit_checked, s.all_hit_steps, s.item_size_mismatch,
      s.unready_writes, s.unready_checked);
  std::fflush(stdout);
}

}  // namespace mac::cuda::test
