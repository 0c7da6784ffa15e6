// GPU tests of mac_cuda: Engine creation and the device-side guards: unsupported D, G and
// max_context refused; a kv_len or page id out of range flagged; strided q, out and lse.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(engine)

BOOST_AUTO_TEST_CASE(refusals) {
  std::unique_ptr<Engine> e;
  EngineConfig ec;
  ec.num_q_heads = 8;
  ec.num_kv_heads = 2;
  ec.head_dim = 96;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kUnsupported));
  ec.head_dim = 128;
  ec.num_q_heads = 34;
  ec.num_kv_heads = 2;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kUnsupported));  // G = 17
  ec.num_q_heads = 8;
  ec.max_context = kMaxContext + 1;
  BOOST_TEST((Engine::create(ec, &e).code == StatusCode::kContextTooLong));
  // A kv_len beyond max_context on the device: NaN output, error flag, nothing written.
  CaseSpec c;
  c.prompt = {300, 200};
  c.steps = 1;
  Harness hx(c);
  hx.prefill();
  hx.upload_step();
  DecodeParams p = hx.params();
  std::vector<int32_t> len = {300 + 1, 1 << 20};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.kv_len), len.data(), 8));
  MAC_CHECK(hx.engine().mac_step(p, nullptr));
  int flags = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, nullptr));
  BOOST_TEST((flags & 1) == 1);
  // A page id outside the pool: clamped (no out-of-bounds read) and flagged.
  std::vector<int32_t> bad = {-5, 1 << 30};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.page_table), bad.data(), 4));
  MAC_CHECK(
      copy_to_device(const_cast<int32_t*>(p.page_table) + p.max_pages_per_row, bad.data() + 1, 4));
  len = {300 + 1, 200 + 1};
  MAC_CHECK(copy_to_device(const_cast<int32_t*>(p.kv_len), len.data(), 8));
  MAC_CHECK(hx.engine().mac_step(p, nullptr));
  int flags2 = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags2, true, nullptr));
  BOOST_TEST((flags2 & 4) == 4);
  std::printf(
      "[OK] refusals: unsupported D/G and max_context refused; device flags %d for kv_len 2^20, %d "
      "for bad page ids\n",
      flags, flags2);
}

namespace {

// One step's out [N, Hq, D] bf16 bits and lse [N, Hq] fp32 bits, gathered from strided
// device buffers into the packed order.
struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

Outputs gather(const DecodeParams& p, int N, int Hq, int D, size_t out_elems, size_t lse_elems,
               void* stream) {
  std::vector<uint16_t> o(out_elems);
  std::vector<float> l(lse_elems);
  MAC_CHECK(copy_to_host(o.data(), p.out, o.size() * 2, stream));
  MAC_CHECK(copy_to_host(l.data(), p.lse, l.size() * 4, stream));
  MAC_CHECK(stream_synchronize(stream));
  const int64_t ohs = p.out_head_stride ? p.out_head_stride : D;
  const int64_t ors = p.out_row_stride ? p.out_row_stride : Hq * ohs;
  const int64_t lhs = p.lse_head_stride ? p.lse_head_stride : 1;
  const int64_t lrs = p.lse_row_stride ? p.lse_row_stride : Hq * lhs;
  Outputs g;
  for (int i = 0; i < N; ++i)
    for (int h = 0; h < Hq; ++h) {
      for (int d = 0; d < D; ++d) g.out.push_back(o[i * ors + h * ohs + d]);
      g.lse.push_back(l[i * lrs + h * lhs]);
    }
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(strided_q_out_lse_equal_packed) {
  // q with padded heads and rows, out heads-major with padding, lse strided: a full-attention
  // step and a MAC step (its ring position m restored in between) give every output and LSE
  // bit of the packed run, the padding (NaN or sentinel bits) stays untouched, and an out
  // stride whose heads overlap is refused naming out.
  const CaseSpec c = one_step_case(1201);
  Harness hx(c);
  hx.ready_first_step();
  void* st = hx.stream();
  const DecodeParams p = hx.params();
  const int N = hx.batch(), Hq = c.G * c.Hkv, D = c.D;
  const size_t packed = static_cast<size_t>(N) * Hq * D;

  // Strided layouts and their buffers, padding filled with sentinel bits.
  DecodeParams s = p;
  s.q_head_stride = D + 8;
  s.q_row_stride = Hq * s.q_head_stride + 16;
  s.out_row_stride = D;
  s.out_head_stride = static_cast<int64_t>(N) * D + 8;
  s.lse_head_stride = 2;
  s.lse_row_stride = 2 * Hq + 1;
  const size_t q_elems = static_cast<size_t>(N) * s.q_row_stride;
  const size_t out_elems = static_cast<size_t>(Hq) * s.out_head_stride;
  const size_t lse_elems = static_cast<size_t>(N) * s.lse_row_stride;
  constexpr uint16_t kPad16 = 0x7fc1;  // a NaN no kernel writes
  constexpr float kPadF = 12345.5f;
  DeviceBuffer q_post, q_pre, out, lse;
  MAC_CHECK(q_post.allocate(q_elems * 2));
  MAC_CHECK(q_pre.allocate(q_elems * 2));
  MAC_CHECK(out.allocate(out_elems * 2));
  MAC_CHECK(lse.allocate(lse_elems * 4));
  for (auto [src, dst] : {std::pair{p.q_post, &q_post}, std::pair{p.q_pre, &q_pre}}) {
    std::vector<uint16_t> a(packed), b(q_elems, kPad16);
    MAC_CHECK(copy_to_host(a.data(), src, packed * 2, st));
    MAC_CHECK(stream_synchronize(st));
    for (int i = 0; i < N; ++i)
      for (int h = 0; h < Hq; ++h)
        std::copy_n(&a[(static_cast<size_t>(i) * Hq + h) * D], D,
                    &b[i * s.q_row_stride + h * s.q_head_stride]);
    MAC_CHECK(copy_to_device(dst->data(), b.data(), q_elems * 2, st));
  }
  s.q_post = q_post.as<uint16_t>();
  s.q_pre = q_pre.as<uint16_t>();
  s.out = out.as<uint16_t>();
  s.lse = lse.as<float>();
  auto reset_outputs = [&] {
    std::vector<uint16_t> o(out_elems, kPad16);
    std::vector<float> l(lse_elems, kPadF);
    MAC_CHECK(copy_to_device(s.out, o.data(), out_elems * 2, st));
    MAC_CHECK(copy_to_device(s.lse, l.data(), lse_elems * 4, st));
  };
  auto padding_intact = [&] {
    std::vector<uint16_t> o(out_elems);
    std::vector<float> l(lse_elems);
    MAC_CHECK(copy_to_host(o.data(), s.out, out_elems * 2, st));
    MAC_CHECK(copy_to_host(l.data(), s.lse, lse_elems * 4, st));
    MAC_CHECK(stream_synchronize(st));
    long touched = 0;
    for (size_t e = 0; e < out_elems; ++e)
      if (static_cast<int64_t>(e % s.out_head_stride) >= static_cast<int64_t>(N) * D)
        touched += o[e] != kPad16;
    for (size_t e = 0; e < lse_elems; ++e) {
      const int64_t in_row = static_cast<int64_t>(e % s.lse_row_stride);
      if (in_row % 2 != 0 || in_row >= 2 * Hq) touched += l[e] != kPadF;
    }
    return touched;
  };

  RingPositions saved(p, Hq, D, st);  // so that the MAC step can run twice

  for (int mac = 0; mac < 2; ++mac) {
    if (mac) {
      MAC_CHECK(hx.engine().mac_step(p, st));
    } else {
      MAC_CHECK(hx.engine().full_attention(p, st));
    }
    const Outputs want = gather(p, N, Hq, D, packed, static_cast<size_t>(N) * Hq, st);
    if (mac) saved.restore(p, st);
    reset_outputs();
    if (mac) {
      MAC_CHECK(hx.engine().mac_step(s, st));
    } else {
      MAC_CHECK(hx.engine().full_attention(s, st));
    }
    const Outputs got = gather(s, N, Hq, D, out_elems, lse_elems, st);
    const bool same_out = got.out == want.out;
    const bool same_lse =
        std::memcmp(got.lse.data(), want.lse.data(), want.lse.size() * sizeof(float)) == 0;
    const long touched = padding_intact();
    BOOST_TEST(same_out);
    BOOST_TEST(same_lse);
    BOOST_TEST(touched == 0);
    std::printf(
        "[%s] %s step with strided q/out/lse: out bits %s, lse bits %s, %ld padding "
        "elements written\n",
        same_out && same_lse && touched == 0 ? "OK" : "FAIL", mac ? "MAC" : "full",
        same_out ? "equal" : "DIFFER", same_lse ? "equal" : "DIFFER", touched);
  }
  int flags = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, st));
  BOOST_TEST(flags == 0);

  DecodeParams bad = s;
  bad.out_head_stride = D / 2;  // heads overlap within a row
  bad.out_row_stride = 0;
  const Status refused = hx.engine().full_attention(bad, st);
  BOOST_TEST((refused.code == StatusCode::kInvalidArgument));
  BOOST_TEST(refused.message.find("out") != std::string::npos, refused.message);
}

BOOST_AUTO_TEST_SUITE_END()
