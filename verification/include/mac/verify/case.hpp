#pragma once
/*! \file case.hpp
 *  \brief One case of the certification matrix (verification/matrix.tsv): its parameters,
 *         parsing and printing, and the matrix itself (embedded at build time).
 *
 *  A case is a batch of `batch` requests of one layer shape (D, Hq = G·Hkv), each decoding
 *  `steps` positions after its prompt. Request i has first-decode context
 *  `ctx_i = ctx − (i·dctx) mod (ctx/2 + 1)` (kv_len of its first decode step, so its prompt
 *  is P_i = ctx_i − 1 and it decodes m = P_i … P_i + steps − 1).
 */
#include "mac/ref/common.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::verify {

/*! \brief Parameters of one case; one line of matrix.tsv. */
struct CaseSpec {
  int id = 0;
  std::string family;  //!< grid, long, lag, batch, wrap, tie, threshold, small, gen_min, ...
  uint64_t seed = 1;   //!< fixed seed of every random input of the case
  int D = 128, G = 4, Hkv = 2, batch = 1;
  int64_t ctx = 1037;  //!< kv_len of request 0's first decode step (prompt P = ctx − 1)
  int64_t dctx = 0;    //!< context spread across the batch (see file comment)
  int ps = 16;         //!< KV page size (GPU)
  int64_t M = 512, r = 256, F = 0, gen_min = 0;
  double tau = 0.45;
  int64_t steps = 6;             //!< decode steps per request
  double hit = 0.5;              //!< planted-hit fraction per step (round(hit·Hq) heads, permuted)
  std::string lags = "u";        //!< lag choices of planted hits (see inputs.hpp)
  std::string ready = "1";       //!< readiness pattern over requests, cyclic ('1' ready, '0' not)
  bool graph = false;            //!< GPU: capture one step, replay every step
  std::string k3 = "fused";      //!< GPU: "fused" | "side"
  std::string special = "none";  //!< tie | thr_eq | thr_below | thr_above | thr_mix |
                                 //!< logits:<s> | cancel:<g> | vscale:<s> | none
  bool smoke = false;            //!< member of the `smoke` subset (CI)
  int64_t K = -1;                //!< depth cap (semantics §3.3); −1: none
  int64_t N = 0;                 //!< refresh period (semantics §3.3); 0: none
  int64_t W = 0;                 //!< gate window (semantics §3.5), MacParams::gate_window; 0: off
  int64_t P = 256;               //!< gate probe, MacParams::gate_probe
  int64_t mu = 1000;             //!< gate margin ‰, MacParams::gate_margin
  int64_t hmin = 0;              //!< gate minimum hit rate ‰, MacParams::gate_min_hit
  int64_t Bfix = kGateFixedBytesDefault;  //!< gate fixed bytes, MacParams::gate_fixed_bytes
                                          //!< of every request (not divided by the batch)

  int Hq() const { return G * Hkv; }
  int64_t context(int i) const;  //!< ctx_i (≥ 2)
  int64_t prompt(int i) const { return context(i) - 1; }
  bool request_ready(int i) const { return ready[static_cast<size_t>(i) % ready.size()] == '1'; }
  int64_t max_kv_len() const;  //!< largest kv_len of any step of any request
  MacParams params() const;
  /*! \brief Whether the case sets a policy of semantics §3.3 (K ≥ 0 or N > 0). */
  bool has_policy() const { return K >= 0 || N > 0; }
  /*! \brief Whether the case turns the adaptive gate of semantics §3.5 on (W > 0). */
  bool has_gate() const { return W > 0; }
  double scale() const;  //!< softmax scale 1/√D
  /*! \brief The factor s of `special = logits:s` (q and k scaled by s), else 1. */
  double logit_scale() const;

  /*! \brief Rough cost units (key·head evaluations) of the FP32 reference (prefill + steps)
   *  and of the expected-value evaluation; used for caps, shards and the progress estimate. */
  double cost_reference() const;
  double cost_expected() const;

  /*! \brief Throws InputError naming the offending column on an invalid case. */
  void validate() const;
  std::string to_line() const;   //!< the tab-separated matrix line
  std::string describe() const;  //!< short human-readable summary
};

/*! \brief Column names of matrix.tsv in order. */
const std::vector<std::string>& matrix_columns();
/*! \brief Parses one tab-separated line (InputError naming the column on a bad value). */
CaseSpec parse_case(const std::string& line);
/*! \brief Parses a whole matrix text ('#' lines are comments). Ids must be 0, 1, 2, … */
std::vector<CaseSpec> parse_matrix(const std::string& text);
/*! \brief The matrix compiled into the library (verification/matrix.tsv at build time). */
const std::vector<CaseSpec>& builtin_matrix();
/*! \brief The embedded matrix text. */
const std::string& builtin_matrix_text();

}  // namespace mac::verify
