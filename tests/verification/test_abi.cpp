// The ABI core's checks against an implementation gaming the driver (abi_case.hpp), each
// shown to catch what it is meant to: the CPU reference plugin, loaded into this process
// through the in-process channel, with one deliberate misbehaviour added after its step.
// Also: capabilities as text, applicability, the nonce, SHA-256 and the input hash.
#include <boost/test/unit_test.hpp>

#include "mac/verify/check.hpp"
#include "mac/verify/plugin.hpp"
#include "mac/verify/sha256.hpp"

#include <algorithm>
#include <cstring>

using namespace mac;
using namespace mac::verify;

namespace {

enum class Misdeed {
  kNone,
  kChangeQ,         //!< flips a bit of the input q
  kChangeKCache,    //!< flips a bit of the K cache
  kWriteOtherSlot,  //!< changes L of ring slot (m + 1) mod M (not the one it may write)
  kSkipHit,         //!< leaves hit of (request 0, head 0) unwritten
  kWriteNotReady,   //!< changes ring slot m mod M of request 0, which is not ready
  kGateHits,        //!< adds one hit to request 0's gate state (a ready request)
  kGateNotReady,    //!< changes off_left of request 1's gate state, which is not ready
};

PluginApi g_reference;
Misdeed g_misdeed = Misdeed::kNone;

int32_t misbehaving_step(macv_handle* h, const macv_step_inputs* in, macv_step_outputs* out,
                         void* stream, char* err, size_t n) {
  const int32_t rc = g_reference.step(h, in, out, stream, err, n);
  const int64_t m = *static_cast<const int64_t*>(in->position.data);
  const int64_t M = in->ring_lse.shape[2];
  float* L = static_cast<float*>(in->ring_lse.data);
  switch (g_misdeed) {
    case Misdeed::kNone: break;
    case Misdeed::kChangeQ: static_cast<uint16_t*>(in->q.data)[0] ^= 1; break;
    case Misdeed::kChangeKCache: static_cast<uint16_t*>(in->k_cache.data)[0] ^= 1; break;
    case Misdeed::kWriteOtherSlot: L[((m + 1) % M) * in->ring_lse.strides[2]] += 1; break;
    case Misdeed::kSkipHit: static_cast<uint8_t*>(out->hit.data)[0] = 0xA5; break;
    case Misdeed::kWriteNotReady: L[(m % M) * in->ring_lse.strides[2]] += 1; break;
    case Misdeed::kGateHits: static_cast<int64_t*>(in->gate_state.data)[2] += 1; break;
    case Misdeed::kGateNotReady:
      static_cast<int64_t*>(in->gate_state.data)[in->gate_state.strides[0] + 4] += 1;
      break;
  }
  return rc;
}

CaseResult run_with(Misdeed d, int id, uint64_t nonce = 0) {
  if (!g_reference.step)
    g_reference = load_plugin(MAC_BINARY_DIR "/plugins/mac_plugin_reference.so");
  g_misdeed = d;
  PluginApi api = g_reference;
  api.step = misbehaving_step;
  auto impl = make_abi_impl(make_local_channel(api), "reference-under-test", "cpu", 0);
  RunOptions opt;
  opt.tol = Tolerances::cpu();
  opt.keep_steps_on_failure = false;
  opt.nonce = nonce;
  return run_case(builtin_matrix()[static_cast<size_t>(id)], *impl, opt);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(abi_core)

// Case 0: batch of 3, D = 64, ready; case 516: three requests, the first and the last not
// ready (pattern 010).
BOOST_AUTO_TEST_CASE(reference_through_the_abi_passes) {
  for (int id : {0, 516}) {
    const auto r = run_with(Misdeed::kNone, id);
    BOOST_TEST_INFO("case " << id << ": " << r.message);
    BOOST_TEST((r.status == CaseStatus::kPass), r.message);
    BOOST_TEST(r.entries_checked > 0);
  }
}

BOOST_AUTO_TEST_CASE(changed_inputs_fail) {
  auto r = run_with(Misdeed::kChangeQ, 0);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message, "changed its input q "), r.message);
  r = run_with(Misdeed::kChangeKCache, 0);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message, "changed its input k_cache"), r.message);
}

BOOST_AUTO_TEST_CASE(a_ring_slot_it_may_not_write_fails) {
  const auto r = run_with(Misdeed::kWriteOtherSlot, 0);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message, "a step may write only slot m mod M"), r.message);
}

BOOST_AUTO_TEST_CASE(an_unwritten_output_fails) {
  const auto r = run_with(Misdeed::kSkipHit, 0);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message, "not written"), r.message);
}

BOOST_AUTO_TEST_CASE(a_write_for_a_request_not_ready_fails) {
  const auto r = run_with(Misdeed::kWriteNotReady, 516);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST((contains(r.message, "not ready") || contains(r.message, "may write only")),
             r.message);
}

// The gate (semantics §3.5): case 903 switches off and probes (batch 1), case 924 has request 1
// not ready (pattern 101). The reference plugin's gate_state passes; a state that differs from
// the reference's fails naming the request, the field, got and expected, even where the
// decisions stay right; a change to the state of a request that is not ready fails by itself.
BOOST_AUTO_TEST_CASE(gate_state_checked_after_every_step) {
  for (int id : {903, 924}) {
    const auto r = run_with(Misdeed::kNone, id);
    BOOST_TEST((r.status == CaseStatus::kPass), "case " << id << ": " << r.message);
  }
  auto r = run_with(Misdeed::kGateHits, 903);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message, "request 0 m 2048: gate state hits got 1, expected 0"), r.message);
  r = run_with(Misdeed::kGateNotReady, 924);
  BOOST_TEST((r.status == CaseStatus::kFail), r.message);
  BOOST_TEST(contains(r.message,
                      "gate state of request 1 (not ready) changed: off_left 0 before "
                      "the call, 1 after"),
             r.message);
}

BOOST_AUTO_TEST_CASE(gate_cases_need_the_gate_policy) {
  const auto& m = builtin_matrix();
  const auto from = [](const std::string& t) { return verify::abi::caps_from_text(t); };
  BOOST_TEST(verify::abi::not_applicable(from("policies = 3\n"), m[903]) ==
             "gate window W = 2 but the gate policy (MACV_POLICY_GATE) is not declared");
  BOOST_TEST(verify::abi::not_applicable(from("policies = 4\n"), m[903]) == "");
  BOOST_TEST(verify::abi::not_applicable(from("policies = 3\n"), m[900]) == "");
  // The state tensor [B, 5] I64 is laid out only for a gate case of a plugin declaring it.
  const auto in = make_inputs(m[924]);
  const verify::abi::AbiCase with(in, verify::abi::choose(from("policies = 4\n"), m[924]));
  const auto& t = with.layout().t[verify::abi::kGateState];
  BOOST_TEST(t.present == 1);
  BOOST_TEST(t.dtype == MACV_I64);
  BOOST_TEST(t.shape[0] == 3);
  BOOST_TEST(t.shape[1] == 5);
  const verify::abi::AbiCase without(in, verify::abi::choose(from("policies = 3\n"), m[924]));
  BOOST_TEST(!without.layout().t[verify::abi::kGateState].present);
  const auto in0 = make_inputs(m[0]);
  const verify::abi::AbiCase off(in0, verify::abi::choose(from("policies = 4\n"), m[0]));
  BOOST_TEST(!off.layout().t[verify::abi::kGateState].present);
  BOOST_TEST(std::string(verify::abi::tensor_name(verify::abi::kGateState)) == "gate_state");
}

BOOST_AUTO_TEST_CASE(the_nonce_draws_other_inputs_reproducibly) {
  const CaseSpec& c = builtin_matrix()[0];
  BOOST_TEST(with_nonce(c, 0).seed == c.seed);
  BOOST_TEST(with_nonce(c, 7).seed != c.seed);
  BOOST_TEST(with_nonce(c, 7).seed == with_nonce(c, 7).seed);
  BOOST_TEST(with_nonce(c, 7).seed != with_nonce(c, 8).seed);
  const auto a = run_with(Misdeed::kNone, 0, 7), b = run_with(Misdeed::kNone, 0, 7);
  const auto z = run_with(Misdeed::kNone, 0, 0);
  BOOST_TEST((a.status == CaseStatus::kPass), a.message);
  BOOST_TEST(a.rel_l2_max == b.rel_l2_max);  // same nonce, same inputs, same bits
  BOOST_TEST(a.rel_l2_max != z.rel_l2_max);  // another nonce, other inputs
}

BOOST_AUTO_TEST_CASE(capabilities_as_text) {
  const macv_caps c = verify::abi::caps_from_text(
      "name = k\nhead_dims = 64, 128\ngqa_ratios = any\nkv_layouts = nhd,hnd\nsinks = 0\n"
      "out_dtype = f32\nring_o_dtype = f32\ntight_tolerances = 1\nvariants = fused,side\n");
  BOOST_TEST(verify::abi::validate_caps(c) == "");
  BOOST_TEST(c.num_head_dims == 2);
  BOOST_TEST(c.kv_layouts == (MACV_KV_NHD | MACV_KV_HND));
  BOOST_TEST(verify::abi::caps_to_text(verify::abi::caps_from_text(verify::abi::caps_to_text(c))) ==
             verify::abi::caps_to_text(c));
  BOOST_CHECK_THROW(verify::abi::caps_from_text("head_dim = 64\n"), InputError);
  BOOST_CHECK_THROW(verify::abi::caps_from_text("out_dtype = fp16\n"), InputError);
  // Tight limits need FP32 outputs and ring.
  BOOST_TEST(verify::abi::validate_caps(
                 verify::abi::caps_from_text("name = k\ntight_tolerances = 1\n")) != "");
  // Applicability names the value and the declared list.
  const auto& m = builtin_matrix();
  BOOST_TEST(verify::abi::not_applicable(c, m[240]) ==
             "head dim 256 not among the declared 64,128");
  BOOST_TEST(contains(verify::abi::not_applicable(c, m[16]), "sinks F = "));  // case 16 has F = 64
  BOOST_TEST(verify::abi::not_applicable(c, m[0]) == "");
  // A case's k3 column picks the variant of that name.
  BOOST_TEST(verify::abi::choose(c, m[0]).variant == 0);  // k3 = fused
}

// The decisions capability (plugin_abi.h): a plain decode kernel declares no ring and no
// policy, and every case of a shape it supports is applicable to it.
BOOST_AUTO_TEST_CASE(decisions_capability) {
  const auto from = [](const std::string& t) {
    return verify::abi::caps_from_text("name = k\n" + t);
  };
  BOOST_TEST(verify::abi::validate_caps(from("")) == "");
  BOOST_TEST(from("").decisions == MACV_DECISIONS_REPORTED);  // not given: today's behaviour
  BOOST_TEST(contains(verify::abi::validate_caps(from("decisions = 3\n")), "decisions = 3"));
  // writes_ring defaults to 1 in the text form: a plain kernel must say 0.
  BOOST_TEST(contains(verify::abi::validate_caps(from("decisions = 2\n")), "writes_ring = 1"));
  BOOST_TEST(
      contains(verify::abi::validate_caps(from("decisions = 2\nwrites_ring = 0\npolicies = 1\n")),
               "policies = 1"));
  const macv_caps plain = from("decisions = 2\nwrites_ring = 0\nsinks = 0\nhead_dims = 64\n");
  BOOST_TEST(verify::abi::validate_caps(plain) == "");
  BOOST_TEST((verify::abi::grading(plain) == Grading::kExact));
  BOOST_TEST((verify::abi::grading(from("decisions = 1\n")) == Grading::kMacValues));
  const auto& m = builtin_matrix();
  BOOST_TEST(verify::abi::not_applicable(plain, m[16]) == "");  // F = 64: no sinks needed
  BOOST_TEST(contains(verify::abi::not_applicable(plain, m[240]), "head dim 256"));
  for (const auto& c : m)
    if (c.has_policy() && c.D == 64) {
      BOOST_TEST(verify::abi::not_applicable(plain, c) == "", "policy case " << c.id);
      BOOST_TEST(verify::abi::not_applicable(from("head_dims = 64\n"), c) != "");
      break;
    }
  // No ring and no decision tensors in a plain kernel's arena; a MAC kernel's has both.
  const auto in = make_inputs(m[0]);
  const verify::abi::AbiCase ab(in, verify::abi::choose(plain, m[0]));
  BOOST_TEST(!ab.layout().t[verify::abi::kRingQ].present);
  BOOST_TEST(!ab.layout().t[verify::abi::kHit].present);
  BOOST_TEST(ab.layout().t[verify::abi::kOut].present);
  const verify::abi::AbiCase mac_case(in, verify::abi::choose(from(""), m[0]));
  BOOST_TEST(mac_case.layout().t[verify::abi::kRingQ].present);
  BOOST_TEST(mac_case.layout().t[verify::abi::kMatchPos].present);
}

BOOST_AUTO_TEST_CASE(trial_nonces) {
  for (uint64_t run : {uint64_t{0}, uint64_t{7}}) {
    BOOST_TEST(trial_nonce(run, 0) == run);  // one trial is the run as before
    std::vector<uint64_t> seen = {run};
    for (int t = 1; t < 5; ++t) {
      const uint64_t n = trial_nonce(run, t);
      BOOST_TEST(n != 0);
      BOOST_TEST((std::find(seen.begin(), seen.end(), n) == seen.end()));
      BOOST_TEST(n == trial_nonce(run, t));  // reproducible
      seen.push_back(n);
    }
  }
}

BOOST_AUTO_TEST_CASE(sha256_and_input_hash) {
  // FIPS 180-4 examples.
  BOOST_TEST(sha256_text("abc") ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(sha256_text("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(sha256_text(std::string(1000, 'a')) ==
             "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  // Any one changed bit of an input changes its hash.
  std::vector<uint8_t> v(1037, 0x5a);
  const uint64_t h0 = verify::abi::hash_bytes(v.data(), v.size());
  for (size_t i : {size_t(0), size_t(31), size_t(32), size_t(1036)}) {
    v[i] ^= 4;
    BOOST_TEST(verify::abi::hash_bytes(v.data(), v.size()) != h0);
    v[i] ^= 4;
  }
  BOOST_TEST(verify::abi::hash_bytes(v.data(), v.size()) == h0);
}

BOOST_AUTO_TEST_SUITE_END()
