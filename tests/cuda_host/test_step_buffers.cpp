// mac::cuda::StepBuffers: a bad shape is refused with a message naming the field and value
// (on every machine: the check runs before any allocation); where a CUDA device is present,
// every array is allocated at the documented size and params() points at them.
#define BOOST_TEST_MODULE step_buffers
#include <boost/test/included/unit_test.hpp>

#include <string>

#include "mac/cuda/mac_cuda.hpp"

using namespace mac::cuda;

namespace {

StepShape small_shape() {
  StepShape s;
  s.batch = 3;
  s.num_q_heads = 8;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.num_pages = 10;
  s.page_size = 16;
  s.max_pages_per_row = 4;
  s.ring = 32;
  s.num_slots = 5;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bad_shapes_name_the_field) {
  struct Bad {
    const char* field;
    void (*set)(StepShape&);
  };
  const Bad bad[] = {
      {"batch = 0", [](StepShape& s) { s.batch = 0; }},
      {"num_q_heads = -1", [](StepShape& s) { s.num_q_heads = -1; }},
      {"num_kv_heads = 0", [](StepShape& s) { s.num_kv_heads = 0; }},
      {"head_dim = 0", [](StepShape& s) { s.head_dim = 0; }},
      {"num_pages = 0", [](StepShape& s) { s.num_pages = 0; }},
      {"page_size = 0", [](StepShape& s) { s.page_size = 0; }},
      {"max_pages_per_row = 0", [](StepShape& s) { s.max_pages_per_row = 0; }},
      {"ring = 0", [](StepShape& s) { s.ring = 0; }},
      {"num_slots = 0", [](StepShape& s) { s.num_slots = 0; }},
  };
  for (const Bad& b : bad) {
    StepShape s = small_shape();
    b.set(s);
    StepBuffers sb;
    const Status st = sb.allocate(s);
    BOOST_TEST((st.code == StatusCode::kInvalidArgument), b.field);
    BOOST_TEST(st.message.find(b.field) != std::string::npos, st.message << " names " << b.field);
    BOOST_TEST(sb.q_post.data() == nullptr);  // nothing allocated
  }
}

BOOST_AUTO_TEST_CASE(sizes_and_params) {
  const StepShape s = small_shape();
  StepBuffers sb;
  const Status st = sb.allocate(s);
  if (!cuda_device_present()) {
    // No device (or a CPU-only build): refused as such, never half-reported as success.
    BOOST_TEST(!st.ok());
    BOOST_TEST_MESSAGE("no CUDA device: allocation sizes not checked (" << st.message << ")");
    return;
  }
  BOOST_REQUIRE_MESSAGE(st.ok(), st.message);
  const size_t nh = 3 * 8, kv = size_t{10} * 16 * 2 * 64, rq = size_t{5} * 32 * 8;
  BOOST_TEST(sb.k_cache.bytes() == kv * 2);
  BOOST_TEST(sb.v_cache.bytes() == kv * 2);
  BOOST_TEST(sb.page_table.bytes() == size_t{3} * 4 * 4);
  BOOST_TEST(sb.q_pre.bytes() == nh * 64 * 2);
  BOOST_TEST(sb.out.bytes() == nh * 64 * 2);
  BOOST_TEST(sb.lse.bytes() == nh * 4);
  BOOST_TEST(sb.ring_o.bytes() == rq * 64 * 2);
  BOOST_TEST(sb.ring_lse.bytes() == rq * 4);
  BOOST_TEST(sb.epoch_b.bytes() == size_t{5} * 4);
  BOOST_TEST(sb.diag_match_pos.bytes() == nh * 8);
  const DecodeParams p = sb.params();
  BOOST_TEST(p.batch == 3);
  BOOST_TEST(p.num_pages == 10);
  BOOST_TEST(p.max_pages_per_row == 4);
  BOOST_TEST(p.ring == 32);
  BOOST_TEST(p.num_slots == 5);
  BOOST_TEST((p.q_post == sb.q_post.as<uint16_t>() && p.q_post != nullptr));
  BOOST_TEST((p.ring_lse == sb.ring_lse.as<float>()));
  BOOST_TEST((p.diag_keys_read == sb.diag_keys_read.as<int32_t>()));
  // Without diagnostics the four pointers are null and the rest unchanged.
  StepShape nd = s;
  nd.diagnostics = false;
  BOOST_REQUIRE(sb.allocate(nd).ok());
  const DecodeParams q = sb.params();
  BOOST_TEST((q.diag_hit == nullptr && q.diag_match_pos == nullptr && q.diag_d2 == nullptr &&
              q.diag_keys_read == nullptr));
  BOOST_TEST((q.out != nullptr));
  // A failed call leaves what was there.
  StepShape bad = s;
  bad.ring = 0;
  const void* before = sb.out.data();
  BOOST_TEST(!sb.allocate(bad).ok());
  BOOST_TEST(sb.out.data() == before);
  BOOST_TEST(sb.shape.ring == 32);
}
