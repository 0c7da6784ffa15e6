#include "mac/verify/cuda_impl.hpp"

#include "mac/cuda/mac_cuda.hpp"
#include "mac/ref/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace mac::verify {
namespace {

using namespace mac::cuda;

void ck(const Status& s, const char* what) {
  if (!s.ok())
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + to_string(s.code) + ": " +
                             s.message);
}
#define VCK(expr) ck((expr), #expr)

class CudaImpl final : public Implementation {
 public:
  explicit CudaImpl(int device) : device_(device) {}
  std::string name() const override { return "cuda"; }
  std::string device() const override { return device_description(); }
  bool supports(const CaseSpec& c, std::string* why) const override {
    if (!cuda_device_present()) {
      *why = "no CUDA device (or built without CUDA)";
      return false;
    }
    return true;
  }

  void begin(const CaseInputs& in) override {
    in_ = &in;
    const auto& c = in.spec;
    N_ = c.batch;
    Hq_ = c.Hq();
    D_ = c.D;
    ps_ = c.ps;
    M_ = static_cast<int>(c.M);
    R_ = N_ + 1;
    // Paged KV: pages of all requests shuffled (seeded) in one pool, one spare page.
    int pages = 0;
    max_pages_ = 0;
    for (const auto& rq : in.requests) {
      const int np = static_cast<int>((rq.layer.tokens + ps_ - 1) / ps_);
      max_pages_ = std::max(max_pages_, np);
      pages += np;
    }
    num_pages_ = pages + 1;
    std::vector<int> perm(static_cast<size_t>(pages));
    std::iota(perm.begin(), perm.end(), 0);
    for (int j = pages - 1; j > 0; --j)
      std::swap(
          perm[static_cast<size_t>(j)],
          perm[static_cast<size_t>(uniform01(c.seed, 99, static_cast<uint64_t>(j)) * (j + 1)) %
               (j + 1)]);
    page_table_.assign(static_cast<size_t>(N_) * max_pages_, num_pages_ - 1);
    int k = 0;
    for (int i = 0; i < N_; ++i) {
      const int np =
          static_cast<int>((in.requests[static_cast<size_t>(i)].layer.tokens + ps_ - 1) / ps_);
      for (int j = 0; j < np; ++j)
        page_table_[static_cast<size_t>(i) * max_pages_ + j] = perm[static_cast<size_t>(k++)];
    }
    const size_t kv_elems = static_cast<size_t>(num_pages_) * ps_ * c.Hkv * D_;
    std::vector<uint16_t> hk(kv_elems, 0x7fc0), hv(kv_elems, 0x7fc0);  // NaN poison
    for (int i = 0; i < N_; ++i) {
      const auto& L = in.requests[static_cast<size_t>(i)].layer;
      const int64_t P = in.requests[static_cast<size_t>(i)].prompt;
      for (int64_t t = 0; t < P; ++t) {
        const size_t dst = kv_index(i, t), src = static_cast<size_t>(t) * c.Hkv * D_;
        for (size_t e = 0; e < static_cast<size_t>(c.Hkv) * D_; ++e) {
          hk[dst + e] = ref::bf16_bits(L.k[src + e]);
          hv[dst + e] = ref::bf16_bits(L.v[src + e]);
        }
      }
    }
    StepShape sh;
    sh.batch = N_;
    sh.num_q_heads = Hq_;
    sh.num_kv_heads = c.Hkv;
    sh.head_dim = D_;
    sh.num_pages = num_pages_;
    sh.page_size = ps_;
    sh.max_pages_per_row = max_pages_;
    sh.ring = M_;
    sh.num_slots = R_;
    VCK(b_.allocate(sh));
    // Every upload and every kernel of the case runs on stream_, in order. The legacy default
    // stream does not order against it (stream_ is non-blocking): a kernel on stream_ may start
    // before a copy issued there has landed. Before this, with eight processes per GPU, two
    // cases (365, 840) failed once at their first step and passed when run again alone.
    if (!stream_) VCK(stream_create(&stream_));
    VCK(copy_to_device(b_.k_cache.data(), hk.data(), kv_elems * 2, stream_));
    VCK(copy_to_device(b_.v_cache.data(), hv.data(), kv_elems * 2, stream_));
    VCK(copy_to_device(b_.page_table.data(), page_table_.data(), page_table_.size() * 4, stream_));
    const size_t qn = static_cast<size_t>(N_) * Hq_ * D_, nh = static_cast<size_t>(N_) * Hq_;
    VCK(out_full_.allocate(qn * 2));
    VCK(lse_full_.allocate(nh * 4));
    const size_t rq = static_cast<size_t>(R_) * M_ * Hq_;
    std::vector<float> ninf(rq, -std::numeric_limits<float>::infinity());
    VCK(copy_to_device(b_.ring_lse.data(), ninf.data(), rq * 4, stream_));
    VCK(device_memset(b_.ring_q_pre.data(), 0, rq * D_ * 2, stream_));
    VCK(device_memset(b_.ring_o.data(), 0, rq * D_ * 2, stream_));
    // Request slots: reversed order, slot 0 unused (rows never map to their own index).
    slots_.resize(static_cast<size_t>(N_));
    for (int i = 0; i < N_; ++i) slots_[static_cast<size_t>(i)] = N_ - i;
    VCK(copy_to_device(b_.slot.data(), slots_.data(), static_cast<size_t>(N_) * 4, stream_));
    std::vector<int32_t> rd(static_cast<size_t>(R_), 1), ea(static_cast<size_t>(R_), 7),
        eb(static_cast<size_t>(R_), 7);
    int not_ready = 0;
    for (int i = 0; i < N_; ++i)
      if (!in.requests[static_cast<size_t>(i)].ready) {
        // Alternate the two ways of being not ready: ready = 0, or epochs that differ.
        if (not_ready++ % 2 == 0)
          rd[static_cast<size_t>(slots_[static_cast<size_t>(i)])] = 0;
        else
          eb[static_cast<size_t>(slots_[static_cast<size_t>(i)])] = 8;
      }
    VCK(copy_to_device(b_.ready.data(), rd.data(), static_cast<size_t>(R_) * 4, stream_));
    VCK(copy_to_device(b_.epoch_a.data(), ea.data(), static_cast<size_t>(R_) * 4, stream_));
    VCK(copy_to_device(b_.epoch_b.data(), eb.data(), static_cast<size_t>(R_) * 4, stream_));
    VCK(stream_synchronize(stream_));

    EngineConfig ec;
    ec.max_batch = N_;
    ec.num_q_heads = Hq_;
    ec.num_kv_heads = c.Hkv;
    ec.head_dim = D_;
    ec.max_context = static_cast<int>(c.max_kv_len());
    ec.ring = M_;
    ec.k3_mode = c.k3 == "side" ? K3Mode::kSideStream : K3Mode::kFused;
    ec.device = device_;
    engine_.reset();
    engine_full_.reset();
    VCK(Engine::create(ec, &engine_));
    VCK(Engine::create(ec, &engine_full_));
    captured_ = false;

    // Prefill entries of the last M prompt positions, one request at a time.
    for (int i = 0; i < N_; ++i) {
      const auto& rqi = in.requests[static_cast<size_t>(i)];
      const int64_t P = rqi.prompt;
      const int64_t first = std::max<int64_t>(0, P - M_);
      const int np = static_cast<int>(P - first);
      if (np == 0) continue;
      std::vector<uint16_t> qpre(static_cast<size_t>(np) * Hq_ * D_), qpost(qpre.size());
      const size_t src0 = static_cast<size_t>(first) * Hq_ * D_;
      for (size_t e = 0; e < qpre.size(); ++e) {
        qpre[e] = ref::bf16_bits(rqi.layer.q_pre[src0 + e]);
        qpost[e] = ref::bf16_bits(rqi.layer.q_post[src0 + e]);
      }
      DeviceBuffer dq, dp;
      VCK(dq.allocate(qpre.size() * 2));
      VCK(dp.allocate(qpost.size() * 2));
      VCK(copy_to_device(dq.data(), qpre.data(), qpre.size() * 2, stream_));
      VCK(copy_to_device(dp.data(), qpost.data(), qpost.size() * 2, stream_));
      PrefillParams pp;
      pp.kv = params();
      pp.kv.page_table = b_.page_table.as<int32_t>() + static_cast<size_t>(i) * max_pages_;
      pp.batch = 1;
      pp.num_positions = np;
      int64_t fp = first;
      int32_t sl = slots_[static_cast<size_t>(i)];
      pp.first_pos_host = &fp;
      pp.slot_host = &sl;
      pp.q_pre = dq.as<uint16_t>();
      pp.q_post = dp.as<uint16_t>();
      VCK(engine_->prefill_entries(pp, stream_));
      VCK(stream_synchronize(stream_));
    }
    problem_.clear();
    check_flags("after the prefill");
    check_prefill_entries();
  }

  /*! Reads (and resets) the device error flags; the first nonzero read names the stage. */
  void check_flags(const std::string& where) {
    int flags = 0;
    VCK(engine_->read_error_flags(&flags, true, stream_));
    if (flags && problem_.empty())
      problem_ = msg("device error flags = ", flags, " ", where,
                     " (bit 0: kv_len out of range, bit 1: slot out of range, bit 2: page id)");
  }

  /*! Prefill entries (DESIGN §3 "Prefill"): slot p mod M of every prompt position
   *  p ∈ [max(0, P−M), P) holds q̃_p bit for bit, and its L is −inf iff [Fe(E(p)), E(p))
   *  is empty (E(p) ≤ F). The states themselves are checked where they are reused. */
  void check_prefill_entries() {
    const auto& c = in_->spec;
    const size_t per = static_cast<size_t>(M_) * Hq_;
    std::vector<uint16_t> q(per * D_);
    std::vector<float> l(per);
    for (int i = 0; i < N_; ++i) {
      const auto& rq = in_->requests[static_cast<size_t>(i)];
      const size_t base = static_cast<size_t>(slots_[static_cast<size_t>(i)]) * per;
      VCK(copy_to_host(q.data(), b_.ring_q_pre.as<uint16_t>() + base * D_, q.size() * 2, stream_));
      VCK(copy_to_host(l.data(), b_.ring_lse.as<float>() + base, l.size() * 4, stream_));
      VCK(stream_synchronize(stream_));
      int64_t bad_q = 0, bad_l = 0, first_bad = -1;
      for (int64_t p = std::max<int64_t>(0, rq.prompt - M_); p < rq.prompt; ++p)
        for (int h = 0; h < Hq_; ++h) {
          const size_t e = static_cast<size_t>(p % M_) * Hq_ + h;
          bool qok = true;
          for (int d = 0; d < D_; ++d)
            qok = qok && q[e * D_ + d] == ref::bf16_bits(rq.layer.q_pre_at(p, h)[d]);
          const bool want_empty = prefix_end(p, c.r) <= c.F;
          const bool is_empty = !(l[e] > -std::numeric_limits<float>::infinity());
          bad_q += !qok;
          bad_l += want_empty != is_empty;
          if ((!qok || want_empty != is_empty) && first_bad < 0) first_bad = p;
        }
      if ((bad_q || bad_l) && problem_.empty())
        problem_ = msg("prefill entries of request ", i, ": ", bad_q, " with q̃ not a bit copy, ",
                       bad_l, " with wrong emptiness (first at position ", first_bad, ")");
    }
  }

  void step(int64_t s, StepOutput* out) override {
    const auto& c = in_->spec;
    const size_t nh = static_cast<size_t>(N_) * Hq_, hd = static_cast<size_t>(Hq_) * D_;
    // Upload position m of every request: its K/V token, queries, kv_len.
    std::vector<uint16_t> qp(nh * D_), qr(nh * D_);
    std::vector<int32_t> len(static_cast<size_t>(N_));
    std::vector<uint16_t> tk(static_cast<size_t>(c.Hkv) * D_), tv(tk.size());
    for (int i = 0; i < N_; ++i) {
      const auto& rq = in_->requests[static_cast<size_t>(i)];
      const int64_t m = rq.prompt + s;
      const size_t src = static_cast<size_t>(m) * c.Hkv * D_;
      for (size_t e = 0; e < tk.size(); ++e) {
        tk[e] = ref::bf16_bits(rq.layer.k[src + e]);
        tv[e] = ref::bf16_bits(rq.layer.v[src + e]);
      }
      const size_t dst = kv_index(i, m);
      VCK(copy_to_device(b_.k_cache.as<uint16_t>() + dst, tk.data(), tk.size() * 2, stream_));
      VCK(copy_to_device(b_.v_cache.as<uint16_t>() + dst, tv.data(), tv.size() * 2, stream_));
      VCK(stream_synchronize(stream_));
      for (size_t e = 0; e < hd; ++e) {
        qp[static_cast<size_t>(i) * hd + e] =
            ref::bf16_bits(rq.layer.q_post[static_cast<size_t>(m) * hd + e]);
        qr[static_cast<size_t>(i) * hd + e] =
            ref::bf16_bits(rq.layer.q_pre[static_cast<size_t>(m) * hd + e]);
      }
      len[static_cast<size_t>(i)] = static_cast<int32_t>(m + 1);
    }
    VCK(copy_to_device(b_.q_post.data(), qp.data(), qp.size() * 2, stream_));
    VCK(copy_to_device(b_.q_pre.data(), qr.data(), qr.size() * 2, stream_));
    VCK(copy_to_device(b_.kv_len.data(), len.data(), len.size() * 4, stream_));
    // Ring slot m mod M of every request before the step (not-ready rows must not change it).
    std::vector<std::vector<uint16_t>> before_q(static_cast<size_t>(N_)),
        before_o(static_cast<size_t>(N_));
    std::vector<std::vector<float>> before_l(static_cast<size_t>(N_));
    for (int i = 0; i < N_; ++i)
      read_slot(i, in_->requests[static_cast<size_t>(i)].prompt + s,
                &before_q[static_cast<size_t>(i)], &before_o[static_cast<size_t>(i)],
                &before_l[static_cast<size_t>(i)]);
    VCK(stream_synchronize(stream_));

    const DecodeParams p = params();
    if (c.graph) {
      if (!captured_) {
        VCK(engine_->capture(StepKind::kMac, p, stream_));
        captured_ = true;
      }
      VCK(engine_->replay(stream_));
    } else {
      VCK(engine_->mac_step(p, stream_));
    }
    DecodeParams pf = p;
    pf.out = out_full_.as<uint16_t>();
    pf.lse = lse_full_.as<float>();
    pf.diag_hit = nullptr;
    pf.diag_match_pos = nullptr;
    pf.diag_d2 = nullptr;
    pf.diag_keys_read = nullptr;
    VCK(stream_synchronize(stream_));
    check_flags(msg("after decode step ", s, c.graph ? " (graph replay)" : " (mac_step)"));
    VCK(engine_full_->full_attention(pf, stream_));

    std::vector<uint16_t> o(nh * D_), of(nh * D_);
    std::vector<float> l(nh), lf(nh);
    std::vector<int8_t> hit(nh);
    std::vector<int64_t> mpos(nh);
    std::vector<int32_t> keys(nh);
    VCK(copy_to_host(o.data(), b_.out.data(), o.size() * 2, stream_));
    VCK(copy_to_host(of.data(), out_full_.data(), of.size() * 2, stream_));
    VCK(copy_to_host(l.data(), b_.lse.data(), nh * 4, stream_));
    VCK(copy_to_host(lf.data(), lse_full_.data(), nh * 4, stream_));
    VCK(copy_to_host(hit.data(), b_.diag_hit.data(), nh, stream_));
    VCK(copy_to_host(mpos.data(), b_.diag_match_pos.data(), nh * 8, stream_));
    VCK(copy_to_host(keys.data(), b_.diag_keys_read.data(), nh * 4, stream_));
    VCK(stream_synchronize(stream_));

    out->assign(static_cast<size_t>(N_), std::vector<HeadOutput>(static_cast<size_t>(Hq_)));
    for (int i = 0; i < N_; ++i) {
      const auto& rq = in_->requests[static_cast<size_t>(i)];
      const int64_t m = rq.prompt + s;
      std::vector<uint16_t> aq, ao;
      std::vector<float> al;
      read_slot(i, m, &aq, &ao, &al);
      VCK(stream_synchronize(stream_));
      for (int h = 0; h < Hq_; ++h) {
        const size_t oh = static_cast<size_t>(i) * Hq_ + h;
        auto& ho = (*out)[static_cast<size_t>(i)][static_cast<size_t>(h)];
        ho.hit = hit[oh] != 0;
        ho.match_pos = ho.hit ? mpos[oh] : -1;
        ho.keys_read = keys[oh];
        ho.o.resize(static_cast<size_t>(D_));
        bool same = std::memcmp(&l[oh], &lf[oh], 4) == 0;
        for (int d = 0; d < D_; ++d) {
          ho.o[static_cast<size_t>(d)] = ref::bf16_from_bits(o[oh * D_ + d]);
          same = same && o[oh * D_ + d] == of[oh * D_ + d];
        }
        ho.lse = l[oh];
        ho.full_bit_identical = same ? 1 : 0;
        ho.entry_valid = true;
        const size_t e0 = static_cast<size_t>(h) * D_;
        bool changed =
            std::memcmp(&al[static_cast<size_t>(h)],
                        &before_l[static_cast<size_t>(i)][static_cast<size_t>(h)], 4) != 0;
        bool q_exact = true;
        for (int d = 0; d < D_; ++d) {
          changed = changed || aq[e0 + d] != before_q[static_cast<size_t>(i)][e0 + d] ||
                    ao[e0 + d] != before_o[static_cast<size_t>(i)][e0 + d];
          q_exact = q_exact && aq[e0 + d] == ref::bf16_bits(rq.layer.q_pre_at(m, h)[d]);
        }
        // A ready row must have written slot m mod M (q̃_m is in it); a not-ready row must
        // have left it untouched.
        ho.entry_written = rq.ready ? q_exact : changed;
        ho.entry_q_exact = q_exact;
        ho.entry_o.resize(static_cast<size_t>(D_));
        for (int d = 0; d < D_; ++d)
          ho.entry_o[static_cast<size_t>(d)] = ref::bf16_from_bits(ao[e0 + d]);
        ho.entry_lse = al[static_cast<size_t>(h)];
      }
    }
  }

  std::string end() override {
    std::string m = problem_;
    if (engine_) {
      int flags = 0;
      VCK(engine_->read_error_flags(&flags, true, stream_));
      if (flags && m.empty()) m = msg("device error flags = ", flags, " at the end of the case");
    }
    problem_.clear();
    engine_.reset();
    engine_full_.reset();
    return m;
  }

  ~CudaImpl() override {
    engine_.reset();
    engine_full_.reset();
    if (stream_) stream_destroy(stream_);
  }

 private:
  size_t kv_index(int i, int64_t t) const {
    const int page =
        page_table_[static_cast<size_t>(i) * max_pages_ + static_cast<size_t>(t / ps_)];
    return ((static_cast<size_t>(page) * ps_ + static_cast<size_t>(t % ps_)) * in_->spec.Hkv) * D_;
  }
  void read_slot(int i, int64_t m, std::vector<uint16_t>* q, std::vector<uint16_t>* o,
                 std::vector<float>* l) {
    const size_t base =
        (static_cast<size_t>(slots_[static_cast<size_t>(i)]) * M_ + static_cast<size_t>(m % M_)) *
        Hq_;
    q->resize(static_cast<size_t>(Hq_) * D_);
    o->resize(q->size());
    l->resize(static_cast<size_t>(Hq_));
    VCK(copy_to_host(q->data(), b_.ring_q_pre.as<uint16_t>() + base * D_, q->size() * 2, stream_));
    VCK(copy_to_host(o->data(), b_.ring_o.as<uint16_t>() + base * D_, o->size() * 2, stream_));
    VCK(copy_to_host(l->data(), b_.ring_lse.as<float>() + base, l->size() * 4, stream_));
  }
  DecodeParams params() {
    const auto& c = in_->spec;
    DecodeParams p = b_.params();
    p.softmax_scale = static_cast<float>(in_->scale);
    p.tau = c.tau;
    p.tail = static_cast<int>(c.r);
    p.sinks = static_cast<int>(c.F);
    p.gen_min = static_cast<int>(c.gen_min);
    return p;
  }

  int device_;
  const CaseInputs* in_ = nullptr;
  int N_ = 0, Hq_ = 0, D_ = 0, ps_ = 16, M_ = 0, R_ = 0, max_pages_ = 0, num_pages_ = 0;
  std::vector<int32_t> page_table_, slots_;
  StepBuffers b_;                     // the step's arrays (MAC engine's outputs)
  DeviceBuffer out_full_, lse_full_;  // the full-attention engine's outputs
  std::unique_ptr<Engine> engine_, engine_full_;
  void* stream_ = nullptr;
  bool captured_ = false;
  std::string problem_;  //!< first implementation-level problem of the case (flags, prefill)
};

}  // namespace

std::unique_ptr<Implementation> make_cuda_impl(int device) {
  return std::make_unique<CudaImpl>(device);
}
bool cuda_available() { return cuda::cuda_device_present(); }

}  // namespace mac::verify
