// Host checks of the strides in cuda/src/strides.hpp (the step's per-head tensors, prefill's
// queries, the paged KV cache): 0 resolves to the packed layout, and the validation refuses
// negative, misaligned and overlapping strides with a message naming the tensor and the value,
// and accepts the nested layouts in use.
#define BOOST_TEST_MODULE strides
#include <boost/test/included/unit_test.hpp>

#include <string>

#include "strides.hpp"

namespace sd = mac::cuda::detail;

BOOST_AUTO_TEST_CASE(zero_resolves_to_packed) {
  const sd::HeadStrides s = sd::resolve_strides(0, 0, 8, 128);
  BOOST_TEST(s.head == 128);
  BOOST_TEST(s.row == 8 * 128);
  // A given head stride sets the packed row stride; given strides pass through.
  BOOST_TEST(sd::resolve_strides(0, 256, 8, 128).row == 8 * 256);
  const sd::HeadStrides g = sd::resolve_strides(5000, 136, 8, 128);
  BOOST_TEST(g.row == 5000);
  BOOST_TEST(g.head == 136);
  BOOST_TEST(sd::resolve_strides(0, 0, 8, 1).row == 8);  // lse: [N, Hq]
}

BOOST_AUTO_TEST_CASE(valid_layouts_pass) {
  // Packed, padded heads, padded rows, and heads-major ([Hq, N, D]) layouts.
  BOOST_TEST(sd::check_strides("out", 0, 0, 4, 8, 128, 1, true).empty());
  BOOST_TEST(sd::check_strides("q", 0, 136, 4, 8, 128, 8, true).empty());
  BOOST_TEST(sd::check_strides("q", 2048, 128, 4, 8, 128, 8, true).empty());
  BOOST_TEST(sd::check_strides("out", 128, 4 * 128, 4, 8, 128, 1, true).empty());
  BOOST_TEST(sd::check_strides("lse", 1, 4, 4, 8, 1, 1, true).empty());
  // One row: its stride is never used, so any value ≥ 0 passes.
  BOOST_TEST(sd::check_strides("out", 7, 0, 1, 8, 128, 1, true).empty());
}

BOOST_AUTO_TEST_CASE(bad_strides_are_named) {
  const std::string neg = sd::check_strides("out", -1, 0, 4, 8, 128, 1, true);
  BOOST_TEST(neg.find("out") != std::string::npos);
  BOOST_TEST(neg.find("-1") != std::string::npos);
  const std::string mis = sd::check_strides("q", 0, 132, 4, 8, 128, 8, true);
  BOOST_TEST(mis.find("132") != std::string::npos);
  BOOST_TEST(mis.find("multiples of 8") != std::string::npos);
  // Heads closer than a vector, and rows closer than all heads of a row.
  const std::string heads = sd::check_strides("out", 0, 64, 4, 8, 128, 1, true);
  BOOST_TEST(heads.find("overlap") != std::string::npos);
  BOOST_TEST(heads.find("head 64") != std::string::npos);
  const std::string rows = sd::check_strides("out", 1000, 128, 4, 8, 128, 1, true);
  BOOST_TEST(rows.find("row 1000") != std::string::npos);
  BOOST_TEST(!sd::check_strides("lse", 4, 1, 4, 8, 1, 1, true).empty());
  // Overlap is not checked where the tensor is absent (lse nullptr): alignment still is.
  BOOST_TEST(sd::check_strides("lse", 4, 1, 4, 8, 1, 1, false).empty());
  BOOST_TEST(!sd::check_strides("q", 0, 4, 4, 8, 128, 8, false).empty());
}

BOOST_AUTO_TEST_CASE(prefill_q_strides) {
  // [requests, positions, heads, D]: 0 resolves to packed; packed, padded heads and positions,
  // padded requests and heads-major ([requests, heads, positions, D]) pass.
  const sd::PrefillQStrides p = sd::resolve_prefill_q(0, 0, 0, 64, 8, 128);
  BOOST_TEST(p.head == 128);
  BOOST_TEST(p.position == 8 * 128);
  BOOST_TEST(p.request == 64 * 8 * 128);
  BOOST_TEST(sd::resolve_prefill_q(0, 1200, 136, 64, 8, 128).request == 64 * 1200);
  BOOST_TEST(sd::check_prefill_q(0, 0, 0, 3, 64, 8, 128).empty());
  BOOST_TEST(sd::check_prefill_q(0, 8 * 136 + 16, 136, 3, 64, 8, 128).empty());
  BOOST_TEST(sd::check_prefill_q(64 * 1024 + 512, 0, 0, 3, 64, 8, 128).empty());
  BOOST_TEST(sd::check_prefill_q(8 * 64 * 128, 128, 64 * 128, 3, 64, 8, 128).empty());
  // Refusals name the tensor and the stride: negative, not a multiple of 8, positions closer
  // than the heads of one position, requests closer than their positions.
  const std::string neg = sd::check_prefill_q(0, -8, 0, 3, 64, 8, 128);
  BOOST_TEST(neg.find("position -8") != std::string::npos, neg);
  const std::string mis = sd::check_prefill_q(0, 0, 132, 3, 64, 8, 128);
  BOOST_TEST(mis.find("head 132") != std::string::npos, mis);
  BOOST_TEST(mis.find("multiples of 8") != std::string::npos, mis);
  const std::string pos = sd::check_prefill_q(0, 512, 0, 3, 64, 8, 128);
  BOOST_TEST(pos.find("overlap") != std::string::npos, pos);
  BOOST_TEST(pos.find("position 512") != std::string::npos, pos);
  const std::string req = sd::check_prefill_q(1024, 0, 0, 3, 64, 8, 128);
  BOOST_TEST(req.find("request 1024") != std::string::npos, req);
  // One request: its stride is never used.
  BOOST_TEST(sd::check_prefill_q(8, 0, 0, 1, 64, 8, 128).empty());
}

namespace {
struct Kv {  // the paged-KV fields DecodeParams and PrefillParams share
  const uint16_t* k_cache = reinterpret_cast<const uint16_t*>(16);
  const uint16_t* v_cache = reinterpret_cast<const uint16_t*>(16);
  int64_t num_pages = 4;
  int page_size = 16;
  int64_t kv_page_stride = 0, kv_token_stride = 0, kv_head_stride = 0;
  const int32_t* page_table = reinterpret_cast<const int32_t*>(16);
  int max_pages_per_row = 2;
};
}  // namespace

BOOST_AUTO_TEST_CASE(paged_kv_checks_name_the_field) {
  BOOST_TEST(sd::check_paged_kv(Kv{}, 4, 128).empty());
  Kv k;
  k.kv_head_stride = 136;
  k.kv_token_stride = 4 * 136;
  BOOST_TEST(sd::check_paged_kv(k, 4, 128).empty());
  const struct {
    const char* text;
    void (*set)(Kv&);
  } bad[] = {{"k_cache/v_cache is null", [](Kv& k) { k.v_cache = nullptr; }},
             {"page_table is null", [](Kv& k) { k.page_table = nullptr; }},
             {"page_size = 0", [](Kv& k) { k.page_size = 0; }},
             {"num_pages = 0", [](Kv& k) { k.num_pages = 0; }},
             {"max_pages_per_row = 0", [](Kv& k) { k.max_pages_per_row = 0; }},
             {"head 132", [](Kv& k) { k.kv_head_stride = 132; }}};
  for (const auto& b : bad) {
    Kv k2;
    b.set(k2);
    const std::string m = sd::check_paged_kv(k2, 4, 128);
    BOOST_TEST(m.find(b.text) != std::string::npos, b.text << " in: " << m);
  }
}
