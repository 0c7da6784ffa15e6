#pragma once
// Test harness of the GPU suite: a batch of requests with BF16-rounded random streams, a
// paged KV pool (pages shuffled, poisoned with NaN where nothing was written), rings, and
// one mac::ref::DecodeStepper<double> per request (production storage, split variant) that
// defines the expected decisions, outputs and ring entries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mac/cuda/mac_cuda.hpp"
#include "mac/ref/attention.hpp"
#include "mac/ref/bf16.hpp"
#include "mac/ref/stepper.hpp"

namespace mac::cuda::test {

inline void check(const Status& s, const char* what) {
  if (!s.ok())
    throw std::runtime_error(std::string(what) + ": " + to_string(s.code) + ": " + s.message);
}
#define MAC_CHECK(expr) ::mac::cuda::test::check((expr), #expr)

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

inline uint16_t bits(float x) { return ref::bf16_bits(ref::round_bf16(x)); }

struct Stats {
  double max_rel_l2 = 0, max_abs = 0, max_lse = 0;
  double max_entry_rel_l2 = 0, max_entry_lse = 0;
  long decision_mismatch = 0, heads = 0, hits = 0, bit_mismatch = 0, bit_checked = 0, entries = 0;
  long all_hit_steps = 0;       //!< steps in which the reference hit on every head of every row
  long item_size_mismatch = 0;  //!< steps whose item size contradicts the reference's decisions
  long two_cut_steps = 0;  //!< steps whose eligible rows took another item size than the exact cut
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
  explicit Harness(const CaseSpec& c) : c_(c) {
    N_ = static_cast<int>(c.prompt.size());
    Hq_ = c.G * c.Hkv;
    D_ = c.D;
    R_ = 2 * N_;
    scale_ = 1.0 / std::sqrt(static_cast<double>(D_));
    std::mt19937_64 rng(c.seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    layers_.resize(N_);
    for (int i = 0; i < N_; ++i) {
      auto& L = layers_[i];
      const int T = c.prompt[i] + c.steps;
      L.resize(T, Hq_, c.Hkv, D_);
      for (auto& x : L.k) x = ref::round_bf16(nd(rng));
      for (auto& x : L.v) x = ref::round_bf16(nd(rng));
      for (auto& x : L.q_post) x = ref::round_bf16(nd(rng));
      std::uniform_real_distribution<double> u(0, 1);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < Hq_; ++h) {
          float* q = L.q_pre.data() + (static_cast<size_t>(t) * Hq_ + h) * D_;
          const double pick = u(rng);
          if (t > 0 && pick < c.repeat_prob) {
            // Repeat an earlier query: lag M now and then (the matched slot is the one the
            // step overwrites), else uniform 1..min(t, M).
            int lag =
                pick < 0.1 * c.repeat_prob ? c.M : 1 + static_cast<int>(u(rng) * std::min(t, c.M));
            lag = std::min(lag, t);
            const float* src = L.q_pre.data() + (static_cast<size_t>(t - lag) * Hq_ + h) * D_;
            for (int d = 0; d < D_; ++d) q[d] = ref::round_bf16(src[d] + 0.25f * nd(rng));
          } else {
            for (int d = 0; d < D_; ++d) q[d] = ref::round_bf16(nd(rng));
          }
        }
    }
    // Paged KV: pages of all requests shuffled in one pool; a spare page at the end.
    int pages = 0;
    max_pages_ = 0;
    for (int i = 0; i < N_; ++i) {
      const int T = c.prompt[i] + c.steps;
      const int np = (T + c.page_size - 1) / c.page_size;
      max_pages_ = std::max(max_pages_, np);
      pages += np;
    }
    num_pages_ = pages + 1;
    std::vector<int> perm(pages);
    for (int j = 0; j < pages; ++j) perm[j] = j;
    std::shuffle(perm.begin(), perm.end(), rng);
    page_table_.assign(static_cast<size_t>(N_) * max_pages_, num_pages_ - 1);
    int k = 0;
    for (int i = 0; i < N_; ++i) {
      const int np = (c.prompt[i] + c.steps + c.page_size - 1) / c.page_size;
      for (int j = 0; j < np; ++j) page_table_[static_cast<size_t>(i) * max_pages_ + j] = perm[k++];
    }
    const size_t kv_elems = static_cast<size_t>(num_pages_) * c.page_size * c.Hkv * D_;
    kv_host_k_.assign(kv_elems, 0x7fc0);  // NaN poison where no token was written
    kv_host_v_.assign(kv_elems, 0x7fc0);
    for (int i = 0; i < N_; ++i)
      for (int t = 0; t < c.prompt[i]; ++t) put_token_host(i, t);
    StepShape sh;
    sh.batch = N_;
    sh.num_q_heads = Hq_;
    sh.num_kv_heads = c.Hkv;
    sh.head_dim = D_;
    sh.num_pages = num_pages_;
    sh.page_size = c.page_size;
    sh.max_pages_per_row = max_pages_;
    sh.ring = c.M;
    sh.num_slots = R_;
    MAC_CHECK(b_.allocate(sh));
    MAC_CHECK(copy_to_device(b_.k_cache.data(), kv_host_k_.data(), kv_elems * 2));
    MAC_CHECK(copy_to_device(b_.v_cache.data(), kv_host_v_.data(), kv_elems * 2));
    MAC_CHECK(copy_to_device(b_.page_table.data(), page_table_.data(), page_table_.size() * 4));
    const size_t qn = static_cast<size_t>(N_) * Hq_ * D_;
    MAC_CHECK(out_full_.allocate(qn * 2));
    MAC_CHECK(lse_full_.allocate(static_cast<size_t>(N_) * Hq_ * 4));
    const size_t rq = static_cast<size_t>(R_) * c.M * Hq_;
    std::vector<float> ninf(rq, -std::numeric_limits<float>::infinity());
    MAC_CHECK(copy_to_device(b_.ring_lse.data(), ninf.data(), rq * 4));
    MAC_CHECK(device_memset(b_.ring_q_pre.data(), 0, rq * D_ * 2));
    MAC_CHECK(device_memset(b_.ring_o.data(), 0, rq * D_ * 2));
    slots_.resize(N_);
    for (int i = 0; i < N_; ++i) slots_[i] = (2 * i + 1) % R_;
    MAC_CHECK(copy_to_device(b_.slot.data(), slots_.data(), N_ * 4));
    ready_host_.assign(N_, 1);
    for (size_t i = 0; i < c.ready.size() && i < ready_host_.size(); ++i)
      ready_host_[i] = c.ready[i];
    std::vector<int> rd(R_, 1), ea(R_, 7), eb(R_, 7);
    for (int i = 0; i < N_; ++i)
      if (!ready_host_[i]) eb[slots_[i]] = 8;  // not ready through an epoch mismatch (ready = 1)
    MAC_CHECK(copy_to_device(b_.ready.data(), rd.data(), R_ * 4));
    MAC_CHECK(copy_to_device(b_.epoch_a.data(), ea.data(), R_ * 4));
    MAC_CHECK(copy_to_device(b_.epoch_b.data(), eb.data(), R_ * 4));
    MAC_CHECK(device_synchronize());

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
    MAC_CHECK(Engine::create(ec, &engine_));
    // The other launch mode and the other schedule, so the ineligible rows' bit-identity also
    // shows that launching the kernels as programmatic dependents, and scheduling the items in
    // the amend kernel instead of a schedule kernel, change no bit.
    ec.dependent_launch = !c.pdl;
    ec.schedule = c.schedule == ScheduleMode::kAuto ? ScheduleMode::kKernel : ScheduleMode::kAuto;
    MAC_CHECK(Engine::create(ec, &engine_full_));

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

  DecodeParams params() {
    DecodeParams p = b_.params();
    p.softmax_scale = static_cast<float>(scale_);
    p.tau = c_.tau;
    p.tail = c_.r;
    p.sinks = c_.F;
    p.gen_min = c_.gen_min;
    return p;
  }

  /*! \brief Prefill ring entries of the last M prompt positions on the GPU. */
  void prefill() {
    const int np = c_.M;
    std::vector<int64_t> first(N_);
    std::vector<uint16_t> qpre(static_cast<size_t>(N_) * np * Hq_ * D_), qpost(qpre.size());
    for (int i = 0; i < N_; ++i) {
      first[i] = c_.prompt[i] - np;
      for (int j = 0; j < np; ++j)
        for (size_t e = 0; e < static_cast<size_t>(Hq_) * D_; ++e) {
          const size_t src = (static_cast<size_t>(first[i] + j) * Hq_) * D_ + e;
          const size_t dst = ((static_cast<size_t>(i) * np + j) * Hq_) * D_ + e;
          qpre[dst] = ref::bf16_bits(layers_[i].q_pre[src]);
          qpost[dst] = ref::bf16_bits(layers_[i].q_post[src]);
        }
    }
    DeviceBuffer dq, dp;
    MAC_CHECK(dq.allocate(qpre.size() * 2));
    MAC_CHECK(dp.allocate(qpost.size() * 2));
    MAC_CHECK(copy_to_device(dq.data(), qpre.data(), qpre.size() * 2));
    MAC_CHECK(copy_to_device(dp.data(), qpost.data(), qpost.size() * 2));
    PrefillParams pp;
    pp.kv = params();
    pp.batch = N_;
    pp.num_positions = np;
    pp.first_pos_host = first.data();
    pp.slot_host = slots_.data();
    pp.q_pre = dq.as<uint16_t>();
    pp.q_post = dp.as<uint16_t>();
    MAC_CHECK(engine_->prefill_entries(pp, nullptr));
    MAC_CHECK(device_synchronize());
  }

  /*! \brief Uploads position pos_[i] of every request: its K/V token, queries, kv_len. */
  void upload_step() {
    std::vector<uint16_t> qp(static_cast<size_t>(N_) * Hq_ * D_), qr(qp.size());
    std::vector<int32_t> len(N_);
    for (int i = 0; i < N_; ++i) {
      const int m = pos_[i];
      put_token_device(i, m);
      for (size_t e = 0; e < static_cast<size_t>(Hq_) * D_; ++e) {
        qp[static_cast<size_t>(i) * Hq_ * D_ + e] =
            ref::bf16_bits(layers_[i].q_post[static_cast<size_t>(m) * Hq_ * D_ + e]);
        qr[static_cast<size_t>(i) * Hq_ * D_ + e] =
            ref::bf16_bits(layers_[i].q_pre[static_cast<size_t>(m) * Hq_ * D_ + e]);
      }
      len[i] = m + 1;
    }
    MAC_CHECK(copy_to_device(b_.q_post.data(), qp.data(), qp.size() * 2));
    MAC_CHECK(copy_to_device(b_.q_pre.data(), qr.data(), qr.size() * 2));
    MAC_CHECK(copy_to_device(b_.kv_len.data(), len.data(), N_ * 4));
    MAC_CHECK(device_synchronize());
  }

  /*! \brief Compares the GPU step just run (positions pos_) with the reference steppers,
   *  runs full attention on the same inputs for the bit-identity check, then advances. */
  void check_step(Stats& st, bool verbose = false) {
    const size_t nh = static_cast<size_t>(N_) * Hq_;
    std::vector<uint16_t> out(nh * D_), outf(nh * D_);
    std::vector<float> lse(nh), lsef(nh), d2(nh);
    std::vector<int8_t> hit(nh);
    std::vector<int64_t> mpos(nh);
    MAC_CHECK(device_synchronize());
    MAC_CHECK(copy_to_host(out.data(), b_.out.data(), nh * D_ * 2));
    MAC_CHECK(copy_to_host(lse.data(), b_.lse.data(), nh * 4));
    MAC_CHECK(copy_to_host(hit.data(), b_.diag_hit.data(), nh));
    MAC_CHECK(copy_to_host(mpos.data(), b_.diag_match_pos.data(), nh * 8));
    MAC_CHECK(copy_to_host(d2.data(), b_.diag_d2.data(), nh * 4));
    // Full attention on the same inputs (own engine, same config).
    DecodeParams pf = params();
    pf.out = out_full_.as<uint16_t>();
    pf.lse = lse_full_.as<float>();
    MAC_CHECK(engine_full_->full_attention(pf, nullptr));
    MAC_CHECK(device_synchronize());
    MAC_CHECK(copy_to_host(outf.data(), out_full_.data(), nh * D_ * 2));
    MAC_CHECK(copy_to_host(lsef.data(), lse_full_.data(), nh * 4));
    st.out_hash = fnv1a(st.out_hash, out.data(), out.size() * 2);
    st.out_hash = fnv1a(st.out_hash, lse.data(), lse.size() * 4);
    st.out_hash = fnv1a(st.out_hash, outf.data(), outf.size() * 2);
    st.out_hash = fnv1a(st.out_hash, lsef.data(), lsef.size() * 4);
    const size_t rq = static_cast<size_t>(R_) * c_.M * Hq_;
    std::vector<uint16_t> ro(rq * D_), rqp(rq * D_);
    std::vector<float> rl(rq);
    MAC_CHECK(copy_to_host(ro.data(), b_.ring_o.data(), rq * D_ * 2));
    MAC_CHECK(copy_to_host(rqp.data(), b_.ring_q_pre.data(), rq * D_ * 2));
    MAC_CHECK(copy_to_host(rl.data(), b_.ring_lse.data(), rq * 4));
    MAC_CHECK(device_synchronize());

    bool all_hit = true;
    for (int i = 0; i < N_; ++i) {
      const int m = pos_[i];
      const auto res = steppers_[i]->step(m, ready_host_[i] != 0);
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
        if (verbose && rel > 1e-2)
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
          const size_t re = (static_cast<size_t>(slots_[i]) * c_.M + m % c_.M) * Hq_ + h;
          const auto* e = steppers_[i]->ring().find(h, m);
          bool qok = true;
          for (int d = 0; d < D_; ++d)
            qok = qok &&
                  rqp[re * D_ + d] ==
                      ref::bf16_bits(layers_[i].q_pre[(static_cast<size_t>(m) * Hq_ + h) * D_ + d]);
          if (!qok) st.max_entry_rel_l2 = 1e9;
          if (e->state.is_empty()) {
            if (rl[re] > -std::numeric_limits<float>::infinity()) st.max_entry_lse = 1e9;
          } else {
            double n2 = 0, d2s = 0;
            for (int d = 0; d < D_; ++d) {
              const double g = ref::bf16_from_bits(ro[re * D_ + d]), r = e->state.o[d];
              n2 += (g - r) * (g - r);
              d2s += r * r;
            }
            const double rel2 = std::sqrt(n2 / std::max(d2s, 1e-300));
            st.max_entry_rel_l2 = std::max(st.max_entry_rel_l2, std::isnan(rel2) ? 1e9 : rel2);
            const double dl2 = std::abs(static_cast<double>(rl[re]) - e->state.lse);
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

  Engine& engine() { return *engine_; }
  Engine& full_engine() { return *engine_full_; }
  int batch() const { return N_; }
  const CaseSpec& spec() const { return c_; }

 private:
  size_t kv_index(int i, int t, int hk) const {
    const int page = page_table_[static_cast<size_t>(i) * max_pages_ + t / c_.page_size];
    return ((static_cast<size_t>(page) * c_.page_size + t % c_.page_size) * c_.Hkv + hk) * D_;
  }
  void put_token_host(int i, int t) {
    for (int hk = 0; hk < c_.Hkv; ++hk) {
      const size_t dst = kv_index(i, t, hk);
      for (int d = 0; d < D_; ++d) {
        kv_host_k_[dst + d] = ref::bf16_bits(layers_[i].k_at(t, hk)[d]);
        kv_host_v_[dst + d] = ref::bf16_bits(layers_[i].v_at(t, hk)[d]);
      }
    }
  }
  void put_token_device(int i, int t) {
    put_token_host(i, t);
    for (int hk = 0; hk < c_.Hkv; ++hk) {
      const size_t dst = kv_index(i, t, hk);
      MAC_CHECK(copy_to_device(b_.k_cache.as<uint16_t>() + dst, kv_host_k_.data() + dst, D_ * 2));
      MAC_CHECK(copy_to_device(b_.v_cache.as<uint16_t>() + dst, kv_host_v_.data() + dst, D_ * 2));
    }
  }

  CaseSpec c_;
  int N_ = 0, Hq_ = 0, D_ = 0, R_ = 0, max_pages_ = 0, num_pages_ = 0;
  double scale_ = 0;
  std::vector<ref::LayerData> layers_;
  std::vector<int32_t> page_table_, slots_;
  std::vector<int> ready_host_, pos_;
  bool last_all_hit_ = false;
  std::vector<uint16_t> kv_host_k_, kv_host_v_;
  StepBuffers b_;                     // the step's arrays (MAC engine's outputs)
  DeviceBuffer out_full_, lse_full_;  // the full-attention engine's outputs
  std::unique_ptr<Engine> engine_, engine_full_;
  std::vector<std::unique_ptr<ref::DecodeStepper<double>>> steppers_;
};

inline void report(const char* what, const CaseSpec& c, const Stats& s) {
  const bool ok = s.decision_mismatch == 0 && s.max_rel_l2 <= 1e-2 && s.bit_mismatch == 0 &&
                  s.max_entry_rel_l2 <= 1e-2 && s.max_lse <= 1e-3 && s.max_entry_lse <= 1e-3 &&
                  s.item_size_mismatch == 0;
  std::printf(
      "%s %s | %s: heads %ld hits %ld decision mismatches %ld | out rel-L2 max %.3e, max |err| "
      "%.3e, lse max "
      "|err| %.3e | entries %ld rel-L2 max %.3e lse max |err| %.3e | ineligible bit-identical "
      "%ld/%ld | all-hit "
      "steps %ld, item-size mismatches %ld\n",
      ok ? "[OK]" : "[FAIL]", what, c.name().c_str(), s.heads, s.hits, s.decision_mismatch,
      s.max_rel_l2, s.max_abs, s.max_lse, s.entries, s.max_entry_rel_l2, s.max_entry_lse,
      s.bit_checked - s.bit_mismatch, s.bit_checked, s.all_hit_steps, s.item_size_mismatch);
  std::fflush(stdout);
}

}  // namespace mac::cuda::test
