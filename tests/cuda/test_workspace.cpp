// GPU tests of mac_cuda: the workspace and the engine's device. Engine::workspace_size is what
// an engine uses and create refuses a workspace too small or misaligned, naming it; one
// caller-owned workspace (poisoned before create, which zeroes it) serves two engines with
// steps captured at two batch sizes, interleaved, with the bits of engines that own theirs;
// create and workspace_size leave the caller's current device as it was.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if MAC_CUDA_ENABLED
#include <cuda_runtime.h>
#endif

#include "steps.hpp"

using namespace mac::cuda;
using namespace mac::cuda::test;

BOOST_AUTO_TEST_SUITE(workspace)

BOOST_AUTO_TEST_CASE(size_query_and_refusals) {
  Harness hx(one_step_case());
  const EngineConfig cfg = hx.engine().config();
  size_t need = 0;
  MAC_CHECK(Engine::workspace_size(cfg, &need));
  BOOST_TEST(need == hx.engine().workspace_bytes());
  // A bad config: the status create returns.
  EngineConfig bad = cfg;
  bad.head_dim = 96;
  size_t none = 1;
  BOOST_TEST((Engine::workspace_size(bad, &none).code == StatusCode::kUnsupported));
  BOOST_TEST(none == 0u);
  DeviceBuffer ws;
  MAC_CHECK(ws.allocate(need + 256));
  std::unique_ptr<Engine> e;
  const Status small = Engine::create(cfg, ws.data(), need - 1, &e);
  BOOST_TEST((small.code == StatusCode::kInvalidArgument));
  BOOST_TEST(small.message.find("workspace_bytes") != std::string::npos, small.message);
  BOOST_TEST(!e);
  const Status misaligned = Engine::create(cfg, ws.as<char>() + 128, need, &e);
  BOOST_TEST((misaligned.code == StatusCode::kInvalidArgument));
  BOOST_TEST(misaligned.message.find("aligned") != std::string::npos, misaligned.message);
  MAC_CHECK(Engine::create(cfg, ws.data(), need, &e));
  BOOST_TEST(e->workspace_bytes() == need);
  std::printf("[OK] workspace_size %zu bytes = the engine's; too small and misaligned refused\n",
              need);
}

namespace {

// One step's results: out [N, Hq, D] bf16 bits, lse [N, Hq] fp32 bits, and (MAC) the matched
// positions [N, Hq].
struct StepBits {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  std::vector<int64_t> match_pos;
  bool operator==(const StepBits& o) const {
    return out == o.out && match_pos == o.match_pos &&
           std::memcmp(lse.data(), o.lse.data(), lse.size() * sizeof(float)) == 0;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(caller_workspace_serves_two_batch_sizes) {
  // Engines for batch 3 and batch 2 share one workspace sized for batch 3, filled with 0xff
  // bytes before they are created (an item counter or error flags left so would show). Their
  // captured MAC steps and eager full-attention steps run interleaved, each MAC step's ring
  // position restored after it, and every result has the bits of an engine of the same config
  // that owns its workspace.
  const CaseSpec c = one_step_case(1301);
  Harness hx(c);
  hx.ready_first_step();
  void* st = hx.stream();
  const DecodeParams p3 = hx.params();
  DecodeParams p2 = p3;
  p2.batch = 2;
  const int Hq = c.G * c.Hkv, D = c.D;
  const EngineConfig cfg3 = hx.engine().config();
  EngineConfig cfg2 = cfg3;
  cfg2.max_batch = 2;
  size_t need3 = 0, need2 = 0;
  MAC_CHECK(Engine::workspace_size(cfg3, &need3));
  MAC_CHECK(Engine::workspace_size(cfg2, &need2));
  BOOST_TEST(need2 <= need3);

  // The ring position m of every row, restored after each MAC step so that each sees the same
  // candidates.
  RingPositions saved(p3, Hq, D, st);
  // Runs one step of `e` (captured graph: replay) and reads it back.
  auto run = [&](Engine& e, const DecodeParams& p, bool mac, bool graph) {
    if (graph)
      MAC_CHECK(e.replay(st));
    else if (mac)
      MAC_CHECK(e.mac_step(p, st));
    else
      MAC_CHECK(e.full_attention(p, st));
    const size_t nh = static_cast<size_t>(p.batch) * Hq;
    StepBits b;
    b.out.resize(nh * D);
    b.lse.resize(nh);
    b.match_pos.assign(nh, -2);
    MAC_CHECK(copy_to_host(b.out.data(), p.out, nh * D * 2, st));
    MAC_CHECK(copy_to_host(b.lse.data(), p.lse, nh * 4, st));
    if (mac) {
      MAC_CHECK(copy_to_host(b.match_pos.data(), p.diag_match_pos, nh * 8, st));
      saved.restore(p, st);
    }
    MAC_CHECK(stream_synchronize(st));
    return b;
  };

  // References: engines that own their workspaces.
  std::unique_ptr<Engine> own2;
  MAC_CHECK(Engine::create(cfg2, &own2));
  const StepBits ref3_mac = run(hx.engine(), p3, true, false);
  const StepBits ref3_full = run(hx.engine(), p3, false, false);
  const StepBits ref2_mac = run(*own2, p2, true, false);
  const StepBits ref2_full = run(*own2, p2, false, false);
  long hits = 0;
  for (int64_t m : ref3_mac.match_pos) hits += m >= 0;

  DeviceBuffer ws;
  MAC_CHECK(ws.allocate(need3));
  MAC_CHECK(device_memset(ws.data(), 0xff, need3, st));
  MAC_CHECK(stream_synchronize(st));
  std::unique_ptr<Engine> e3, e2;
  MAC_CHECK(Engine::create(cfg3, ws.data(), need3, &e3));
  MAC_CHECK(Engine::create(cfg2, ws.data(), need3, &e2));
  MAC_CHECK(e3->capture(StepKind::kMac, p3, st));
  MAC_CHECK(e2->capture(StepKind::kMac, p2, st));
  long same = 0, runs = 0;
  for (int round = 0; round < 3; ++round) {
    same += run(*e3, p3, true, true) == ref3_mac;
    same += run(*e2, p2, true, true) == ref2_mac;
    same += run(*e2, p2, false, false) == ref2_full;
    same += run(*e3, p3, false, false) == ref3_full;
    runs += 4;
  }
  int flags = -1;
  MAC_CHECK(e3->read_error_flags(&flags, true, st));
  BOOST_TEST(same == runs);
  BOOST_TEST(flags == 0);
  BOOST_TEST(hits > 0);
  std::printf(
      "[%s] one %zu-byte workspace (batch 2 needs %zu), engines of batch 3 and 2: %ld/%ld "
      "interleaved steps (captured MAC, eager full; %ld hits) with the bits of own-workspace "
      "engines, error flags %d\n",
      same == runs && flags == 0 ? "OK" : "FAIL", need3, need2, same, runs, hits, flags);
}

BOOST_AUTO_TEST_CASE(create_restores_current_device) {
#if MAC_CUDA_ENABLED
  // Every (caller's device, engine's device) pair: create, workspace_size, a create that fails
  // after switching (workspace too small) and one for a device that does not exist leave the
  // caller's device current. With one GPU only the first pair exists.
  int n = 0;
  BOOST_TEST_REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
  Harness hx(one_step_case());
  EngineConfig cfg = hx.engine().config();
  long checked = 0, kept = 0;
  auto current_is = [&](int want) {
    int cur = -1;
    ++checked;
    kept += cudaGetDevice(&cur) == cudaSuccess && cur == want;
  };
  for (int caller = 0; caller < n && caller < 2; ++caller)
    for (int target = 0; target < n && target < 2; ++target) {
      BOOST_TEST_REQUIRE(cudaSetDevice(caller) == cudaSuccess);
      cfg.device = target;
      std::unique_ptr<Engine> e;
      MAC_CHECK(Engine::create(cfg, &e));
      current_is(caller);
      size_t need = 0;
      MAC_CHECK(Engine::workspace_size(cfg, &need));
      current_is(caller);
      // Refused for its size once the device is switched, before the memory is touched.
      void* const fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
      BOOST_TEST((Engine::create(cfg, fake, 256, &e).code == StatusCode::kInvalidArgument));
      current_is(caller);
      cfg.device = n;  // no such device
      BOOST_TEST((Engine::create(cfg, &e).code == StatusCode::kCudaError));
      current_is(caller);
    }
  BOOST_TEST(kept == checked);
  BOOST_TEST_REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::printf("[%s] caller's device current after create/workspace_size: %ld/%ld (%d device%s)\n",
              kept == checked ? "OK" : "FAIL", kept, checked, n, n == 1 ? ", no switch" : "s");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
