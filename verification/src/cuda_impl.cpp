#include "mac/verify/cuda_impl.hpp"

#include "mac/cuda/mac_cuda.hpp"
#include "mac/cuda/runner.hpp"
#include "mac/ref/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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
    if (c.has_policy()) {
      *why = "the CUDA kernels do not implement the policies of semantics §3.3 (K, N) yet";
      return false;
    }
    if (c.has_gate()) {
      *why = "this in-process CUDA path does not run the gate of semantics §3.5 (W > 0)";
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
    M_ = static_cast<int>(c.M);
    R_ = N_ + 1;
    runner::CaseLayout lay;
    lay.num_q_heads = Hq_;
    lay.num_kv_heads = c.Hkv;
    lay.head_dim = D_;
    lay.page_size = c.ps;
    lay.ring = M_;
    for (const auto& rq : in.requests)
      lay.requests.push_back({rq.layer.tokens, rq.prompt, rq.layer.k.data(), rq.layer.v.data(),
                              rq.layer.q_pre.data(), rq.layer.q_post.data()});
    // Paged KV: pages of all requests shuffled (seeded Fisher–Yates) in one pool.
    lay.shuffle_pages = [seed = c.seed](std::vector<int32_t>& perm) {
      for (int j = static_cast<int>(perm.size()) - 1; j > 0; --j)
        std::swap(
            perm[static_cast<size_t>(j)],
            perm[static_cast<size_t>(uniform01(seed, 99, static_cast<uint64_t>(j)) * (j + 1)) %
                 (j + 1)]);
    };
    // Request slots: reversed order, slot 0 unused (rows never map to their own index).
    lay.num_slots = R_;
    for (int i = 0; i < N_; ++i) lay.slots.push_back(N_ - i);
    lay.ready.assign(static_cast<size_t>(R_), 1);
    lay.epoch_a.assign(static_cast<size_t>(R_), 7);
    lay.epoch_b.assign(static_cast<size_t>(R_), 7);
    int not_ready = 0;
    for (int i = 0; i < N_; ++i)
      if (!in.requests[static_cast<size_t>(i)].ready) {
        // Alternate the two ways of being not ready: ready = 0, or epochs that differ.
        const size_t sl = static_cast<size_t>(lay.slots[static_cast<size_t>(i)]);
        if (not_ready++ % 2 == 0)
          lay.ready[sl] = 0;
        else
          lay.epoch_b[sl] = 8;
      }
    lay.softmax_scale = static_cast<float>(in.scale);
    lay.tau = c.tau;
    lay.tail = static_cast<int>(c.r);
    lay.sinks = static_cast<int>(c.F);
    lay.gen_min = static_cast<int>(c.gen_min);

    EngineConfig ec;
    ec.max_batch = N_;
    ec.num_q_heads = Hq_;
    ec.num_kv_heads = c.Hkv;
    ec.head_dim = D_;
    ec.max_context = static_cast<int>(c.max_kv_len());
    ec.ring = M_;
    ec.k3_mode = c.k3 == "side" ? K3Mode::kSideStream : K3Mode::kFused;
    ec.device = device_;
    run_.reset();
    // Every upload and every kernel of the case runs on the runner's stream, in order: the
    // legacy default stream does not order against that non-blocking stream, so a copy issued
    // there could land after a kernel that reads it has started (a race that shows only when
    // several processes share a GPU).
    VCK(runner::CaseRunner::create(lay, ec, ec, &run_));

    // Prefill entries of the last M prompt positions, one request at a time.
    for (int i = 0; i < N_; ++i) {
      const int64_t P = in.requests[static_cast<size_t>(i)].prompt;
      const int64_t first = std::max<int64_t>(0, P - M_);
      const int np = static_cast<int>(P - first);
      if (np > 0) VCK(run_->prefill(i, 1, np, {first}));
    }
    problem_.clear();
    check_flags("after the prefill");
    check_prefill_entries();
  }

  /*! Reads (and resets) the device error flags; the first nonzero read names the stage. */
  void check_flags(const std::string& where) {
    int flags = 0;
    VCK(run_->engine().read_error_flags(&flags, true, run_->stream()));
    if (flags && problem_.empty())
      problem_ = msg("device error flags = ", flags, " ", where,
                     " (bit 0: kv_len out of range, bit 1: slot out of range, bit 2: page id)");
  }

  /*! Prefill entries (docs/semantics.md §3 "Prefill"): slot p mod M of every prompt position
   *  p ∈ [max(0, P−M), P) holds q̃_p bit for bit, and its L is −inf iff [Fe(E(p)), E(p))
   *  is empty (E(p) ≤ F). The states themselves are checked where they are reused. */
  void check_prefill_entries() {
    const auto& c = in_->spec;
    runner::RingSlot ring;
    for (int i = 0; i < N_; ++i) {
      const auto& rq = in_->requests[static_cast<size_t>(i)];
      VCK(run_->read_ring(i, &ring));
      const auto& q = ring.q_pre;
      const auto& l = ring.lse;
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
    std::vector<int64_t> pos(static_cast<size_t>(N_));
    for (int i = 0; i < N_; ++i)
      pos[static_cast<size_t>(i)] = in_->requests[static_cast<size_t>(i)].prompt + s;
    // Upload position m of every request: its K/V token, queries, kv_len.
    VCK(run_->upload_step(pos));
    // Ring slot m mod M of every request before the step (not-ready rows must not change it).
    std::vector<runner::RingSlot> before(static_cast<size_t>(N_));
    for (int i = 0; i < N_; ++i)
      VCK(run_->read_ring_slot(i, pos[static_cast<size_t>(i)], &before[static_cast<size_t>(i)]));

    VCK(run_->mac_step(c.graph));
    VCK(stream_synchronize(run_->stream()));
    check_flags(msg("after decode step ", s, c.graph ? " (graph replay)" : " (mac_step)"));
    VCK(run_->full_attention());
    runner::StepReadback rb;
    VCK(run_->read_step(&rb));
    const auto &o = rb.out, &of = rb.out_full;
    const auto &l = rb.lse, &lf = rb.lse_full;
    const auto& hit = rb.hit;
    const auto& mpos = rb.match_pos;
    const auto& keys = rb.keys_read;

    out->assign(static_cast<size_t>(N_), std::vector<HeadOutput>(static_cast<size_t>(Hq_)));
    for (int i = 0; i < N_; ++i) {
      const auto& rq = in_->requests[static_cast<size_t>(i)];
      const int64_t m = rq.prompt + s;
      runner::RingSlot after;
      VCK(run_->read_ring_slot(i, m, &after));
      const auto &aq = after.q_pre, &ao = after.o;
      const auto& al = after.lse;
      const auto& bf = before[static_cast<size_t>(i)];
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
            std::memcmp(&al[static_cast<size_t>(h)], &bf.lse[static_cast<size_t>(h)], 4) != 0;
        bool q_exact = true;
        for (int d = 0; d < D_; ++d) {
          changed = changed || aq[e0 + d] != bf.q_pre[e0 + d] || ao[e0 + d] != bf.o[e0 + d];
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
    if (run_) {
      int flags = 0;
      VCK(run_->engine().read_error_flags(&flags, true, run_->stream()));
      if (flags && m.empty()) m = msg("device error flags = ", flags, " at the end of the case");
    }
    problem_.clear();
    run_.reset();
    return m;
  }

 private:
  int device_;
  const CaseInputs* in_ = nullptr;
  int N_ = 0, Hq_ = 0, D_ = 0, M_ = 0, R_ = 0;
  std::unique_ptr<runner::CaseRunner> run_;  // the case's arrays, engines and stream
  std::string problem_;  //!< first implementation-level problem of the case (flags, prefill)
};

}  // namespace

std::unique_ptr<Implementation> make_cuda_impl(int device) {
  return std::make_unique<CudaImpl>(device);
}
bool cuda_available() { return cuda::cuda_device_present(); }

}  // namespace mac::verify
