// GPU tests of mac_cuda's prefill (cuda/src/prefill.cu, docs/semantics.md §3 Prefill): prompt
// queries at other strides give the packed run's ring entries bit for bit, and a layout whose
// positions overlap is refused, naming the stride.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(prefill)

BOOST_AUTO_TEST_CASE(strided_prefill_q_equals_packed) {
  // The ring entries of the last M prompt positions, written from queries at three other
  // layouts (padded heads and positions with requests back to back: read in place; padded
  // requests, and heads-major [request, head, position, D]: gathered first, the launches'
  // max_batch rows crossing requests), are the packed prefill's bits; the rings are poisoned
  // before each run, so an entry not written shows. An overlapping layout is refused.
  const CaseSpec c = one_step_case(1302);
  Harness hx(c);
  runner::CaseRunner& run = hx.runner();
  hx.prefill();
  const int N = hx.batch(), M = c.M, Hq = c.G * c.Hkv, D = c.D;
  std::vector<runner::RingSlot> want(N);
  for (int i = 0; i < N; ++i) MAC_CHECK(run.read_ring(i, &want[i]));
  void* st = hx.stream();
  const DecodeParams p = hx.params();
  std::vector<int64_t> first(N);
  for (int i = 0; i < N; ++i) first[i] = c.prompt[i] - M;

  struct Layout {
    const char* name;
    int64_t request, position, head;
  };
  const int64_t hs = D + 8, ps = Hq * hs + 16;
  const Layout layouts[] = {{"padded heads and positions", M * ps, ps, hs},
                            {"padded requests", M * ps + 64, ps, hs},
                            {"heads-major", int64_t{Hq} * M * D, D, int64_t{M} * D}};
  long equal = 0;
  for (const Layout& L : layouts) {
    // q_pre and q_post of position first[i] + j at the layout's strides; padding NaN.
    const size_t elems =
        static_cast<size_t>(N - 1) * L.request + (M - 1) * L.position + (Hq - 1) * L.head + D;
    DeviceBuffer q_dev[2];
    for (int t = 0; t < 2; ++t) {
      std::vector<uint16_t> q(elems, 0x7fc1);
      for (int i = 0; i < N; ++i) {
        const auto& r = run.layout().requests[static_cast<size_t>(i)];
        const float* src = t == 0 ? r.q_pre : r.q_post;
        for (int j = 0; j < M; ++j)
          for (int h = 0; h < Hq; ++h)
            for (int d = 0; d < D; ++d)
              q[i * L.request + j * L.position + h * L.head + d] =
                  runner::bf16_bits(src[((static_cast<size_t>(first[i]) + j) * Hq + h) * D + d]);
      }
      MAC_CHECK(q_dev[t].allocate(elems * 2));
      MAC_CHECK(copy_to_device(q_dev[t].data(), q.data(), elems * 2, st));
      MAC_CHECK(stream_synchronize(st));
    }
    // Poisoned rings.
    const size_t entries = static_cast<size_t>(p.num_slots) * M * Hq;
    MAC_CHECK(device_memset(p.ring_q_pre, 0x7f, entries * D * 2, st));
    MAC_CHECK(device_memset(p.ring_o, 0x7f, entries * D * 2, st));
    MAC_CHECK(device_memset(p.ring_lse, 0x7f, entries * 4, st));
    PrefillParams pp = PrefillParams::from_decode(p);
    pp.batch = N;
    pp.num_positions = M;
    pp.first_pos_host = first.data();
    pp.slot_host = run.layout().slots.data();
    pp.q_pre = q_dev[0].as<uint16_t>();
    pp.q_post = q_dev[1].as<uint16_t>();
    pp.q_request_stride = L.request;
    pp.q_position_stride = L.position;
    pp.q_head_stride = L.head;
    MAC_CHECK(hx.engine().prefill_entries(pp, st));
    bool same = true;
    for (int i = 0; i < N; ++i) {
      runner::RingSlot got;
      MAC_CHECK(run.read_ring(i, &got));
      same = same && got.q_pre == want[i].q_pre && got.o == want[i].o &&
             std::memcmp(got.lse.data(), want[i].lse.data(), got.lse.size() * 4) == 0;
    }
    equal += same;
    BOOST_TEST(same, L.name);
    std::printf("[%s] prefill with q %s (strides %lld, %lld, %lld): ring entries %s\n",
                same ? "OK" : "FAIL", L.name, static_cast<long long>(L.request),
                static_cast<long long>(L.position), static_cast<long long>(L.head),
                same ? "equal to the packed run's" : "DIFFER");
    if (&L == &layouts[0]) {  // positions closer than a position's heads
      pp.q_position_stride = hs;
      const Status refused = hx.engine().prefill_entries(pp, st);
      BOOST_TEST((refused.code == StatusCode::kInvalidArgument));
      BOOST_TEST(refused.message.find("position " + std::to_string(hs)) != std::string::npos,
                 refused.message);
    }
  }
  BOOST_TEST(equal == 3);
  int flags = 0;
  MAC_CHECK(hx.engine().read_error_flags(&flags, true, st));
  BOOST_TEST(flags == 0);
}

BOOST_AUTO_TEST_SUITE_END()
