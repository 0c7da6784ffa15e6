// GPU tests of mac_cuda: Engine creation and the device-side guards: unsupported D, G and
// max_context refused; a kv_len or page id out of range flagged.
#include <boost/test/unit_test.hpp>

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

BOOST_AUTO_TEST_SUITE_END()
