#include "mac/verify/case.hpp"

#include "mac/semantics.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace mac::verify {

int64_t CaseSpec::context(int i) const {
  const int64_t spread = dctx == 0 ? 0 : (static_cast<int64_t>(i) * dctx) % (ctx / 2 + 1);
  return std::max<int64_t>(2, ctx - spread);
}

int64_t CaseSpec::max_kv_len() const {
  int64_t m = 0;
  for (int i = 0; i < batch; ++i) m = std::max(m, context(i) + steps - 1);
  return m;
}

MacParams CaseSpec::params() const {
  MacParams p;
  p.tau = tau;
  p.ring = M;
  p.tail = r;
  p.sinks = F;
  p.gen_min = gen_min;
  p.depth_cap = K;
  p.refresh = N;
  p.gate_window = W;
  p.gate_probe = P;
  p.gate_margin = mu;
  p.gate_min_hit = hmin;
  p.gate_fixed_bytes = Bfix;
  return p;
}

double CaseSpec::scale() const { return 1.0 / std::sqrt(static_cast<double>(D)); }

double CaseSpec::logit_scale() const {
  const std::string p = "logits:";
  if (special.compare(0, p.size(), p) != 0) return 1.0;
  return std::strtod(special.c_str() + p.size(), nullptr);
}

double CaseSpec::cost_reference() const {
  double c = 0;
  for (int i = 0; i < batch; ++i) {
    const double P = static_cast<double>(prompt(i));
    c += Hq() * (std::min<double>(P, static_cast<double>(M)) * P +
                 static_cast<double>(steps) * (P + steps));
  }
  return c * D / 128.0;
}

double CaseSpec::cost_expected() const {
  double c = 0;
  for (int i = 0; i < batch; ++i) {
    const double P = static_cast<double>(prompt(i));
    // Every step evaluates all segments of [0, m] per head, plus lazily matched prompt entries.
    c += Hq() * static_cast<double>(steps) * (P + steps) * (1.0 + hit);
  }
  return c * D / 128.0 + 2e5;  // + fixed per-case overhead (inputs, launches)
}

void CaseSpec::validate() const {
  const std::string w = msg("case ", id, ": ");
  require(
      supported_head_dim(D), w, "D = ", D, " is not a supported head dim (",
      [] {
        std::string s;
        for (int d : kHeadDims) s += (s.empty() ? "" : ", ") + std::to_string(d);
        return s;
      }(),
      ")");
  require(G >= 1 && G <= kMaxGroup, w, "G = ", G, " outside 1..", kMaxGroup);
  require(Hkv >= 1, w, "Hkv = ", Hkv, " must be >= 1");
  require(batch >= 1 && batch <= 256, w, "batch = ", batch, " outside 1..256");
  require(ctx >= 2, w, "ctx = ", ctx, " must be >= 2");
  require(dctx >= 0, w, "dctx = ", dctx, " must be >= 0");
  require(ps >= 1, w, "ps = ", ps, " must be >= 1");
  require(steps >= 1, w, "steps = ", steps, " must be >= 1");
  require(max_kv_len() <= 131072, w, "largest kv_len ", max_kv_len(), " exceeds 131072");
  require(hit >= 0 && hit <= 1, w, "hit = ", hit, " outside [0, 1]");
  require(!lags.empty(), w, "lags is empty");
  require(!ready.empty() && ready.find_first_not_of("01") == std::string::npos, w, "ready = '",
          ready, "' must be a non-empty string of 0 and 1");
  require(k3 == "fused" || k3 == "side", w, "k3 = '", k3, "' must be fused or side");
  params().validate();
  check_gate_config(make_gate_config(params(), Hq(), Hkv, D), max_kv_len() - 1);
}

const std::vector<std::string>& matrix_columns() {
  static const std::vector<std::string> c = {
      "id", "family",  "seed",  "D",       "G",   "Hkv",   "batch", "ctx",  "dctx",  "ps",
      "M",  "r",       "F",     "gen_min", "tau", "steps", "hit",   "lags", "ready", "graph",
      "k3", "special", "smoke", "K",       "N",   "W",     "P",     "mu",   "hmin",  "Bfix"};
  return c;
}

namespace {
/*! The shortest %g form (at least 6 digits) that reads back as `x`: a case line (stored in
 *  reports and failure files) must parse back to the same case. */
std::string fmt_double(double x) {
  char b[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, x);
    if (std::strtod(b, nullptr) == x) break;
  }
  return b;
}
/*! An integer column in [lo, hi]: checked before it is narrowed to the field's type, so
 *  Hkv 4294967298 is refused instead of running as 2. */
int64_t to_int(const std::string& col, const std::string& s, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  require(!s.empty() && end && *end == 0 && errno == 0, "matrix column ", col, " = '", s,
          "' is not an integer");
  require(v >= lo && v <= hi, "matrix column ", col, " = ", v, " is outside [", lo, ", ", hi, "]");
  return v;
}
double to_double(const std::string& col, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  require(!s.empty() && end && *end == 0 && std::isfinite(v), "matrix column ", col, " = '", s,
          "' is not a finite number");
  return v;
}
}  // namespace

std::string CaseSpec::to_line() const {
  std::ostringstream os;
  os << id << '\t' << family << '\t' << seed << '\t' << D << '\t' << G << '\t' << Hkv << '\t'
     << batch << '\t' << ctx << '\t' << dctx << '\t' << ps << '\t' << M << '\t' << r << '\t' << F
     << '\t' << gen_min << '\t' << fmt_double(tau) << '\t' << steps << '\t' << fmt_double(hit)
     << '\t' << lags << '\t' << ready << '\t' << (graph ? 1 : 0) << '\t' << k3 << '\t' << special
     << '\t' << (smoke ? 1 : 0) << '\t' << K << '\t' << N << '\t' << W << '\t' << P << '\t' << mu
     << '\t' << hmin << '\t' << Bfix;
  return os.str();
}

std::string CaseSpec::describe() const {
  std::ostringstream os;
  os << "case " << id << " [" << family << "] D=" << D << " G=" << G << " Hkv=" << Hkv
     << " N=" << batch << " ctx=" << ctx << (dctx ? msg("-", dctx, "i") : "") << " ps=" << ps
     << " M=" << M << " r=" << r << " F=" << F << " gen_min=" << gen_min << " tau=" << tau
     << " steps=" << steps << " hit=" << hit << " lags=" << lags << " ready=" << ready
     << (graph ? " graph" : "") << " k3=" << k3 << (special != "none" ? " " + special : "")
     << (K >= 0 ? msg(" K=", K) : "") << (N > 0 ? msg(" N=", N) : "")
     << (W > 0 ? msg(" W=", W, " P=", P, " mu=", mu, " hmin=", hmin, " Bfix=", Bfix) : "")
     << " seed=" << seed;
  return os.str();
}

CaseSpec parse_case(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  for (char ch : line) {
    if (ch == '\t') {
      f.push_back(cur);
      cur.clear();
    } else if (ch != '\r' && ch != '\n') {
      cur += ch;
    }
  }
  f.push_back(cur);
  const auto& cols = matrix_columns();
  require(f.size() == cols.size(), "matrix line has ", f.size(), " columns, expected ", cols.size(),
          ": '", line, "'");
  CaseSpec c;
  size_t k = 0;
  auto next = [&]() -> std::pair<const std::string&, const std::string&> {
    const size_t i = k++;
    return {cols[i], f[i]};
  };
  // Every integer column is bounded: positions by kMaxTokens, the shape by what validate()
  // accepts (it narrows further), flags to 0 or 1.
  auto I = [&](int64_t lo, int64_t hi) {
    auto p = next();
    return to_int(p.first, p.second, lo, hi);
  };
  auto Dd = [&]() {
    auto p = next();
    return to_double(p.first, p.second);
  };
  auto S = [&]() { return next().second; };
  constexpr int64_t kInt = std::numeric_limits<int>::max();
  c.id = static_cast<int>(I(0, kInt));
  c.family = S();
  {
    auto p = next();
    char* end = nullptr;
    c.seed = std::strtoull(p.second.c_str(), &end, 10);
    require(!p.second.empty() && *end == 0, "matrix column seed = '", p.second,
            "' is not an integer");
  }
  c.D = static_cast<int>(I(1, *std::max_element(std::begin(kHeadDims), std::end(kHeadDims))));
  c.G = static_cast<int>(I(1, kMaxGroup));
  c.Hkv = static_cast<int>(I(1, kMaxHeads / kMaxGroup));
  c.batch = static_cast<int>(I(1, 256));
  c.ctx = I(2, kMaxTokens);
  c.dctx = I(0, kMaxTokens);
  c.ps = static_cast<int>(I(1, kMaxTokens));
  c.M = I(1, kMaxTokens);
  c.r = I(0, kMaxTokens);
  c.F = I(0, kMaxTokens);
  c.gen_min = I(0, kMaxTokens);
  c.tau = Dd();
  c.steps = I(1, kMaxTokens);
  c.hit = Dd();
  c.lags = S();
  c.ready = S();
  c.graph = I(0, 1) != 0;
  c.k3 = S();
  c.special = S();
  c.smoke = I(0, 1) != 0;
  c.K = I(-kMaxTokens, kMaxTokens);  // validate() names the policy ranges
  c.N = I(-kMaxTokens, kMaxTokens);
  // The gate's ranges of MacParams::validate (semantics §3.5).
  c.W = I(0, kGateMaxWindow);
  c.P = I(1, kMaxTokens);
  c.mu = I(1, kGateMaxMargin);
  c.hmin = I(0, kGatePerMille);
  c.Bfix = I(0, kGateMaxFixedBytes);
  c.validate();
  return c;
}

std::vector<CaseSpec> parse_matrix(const std::string& text) {
  std::vector<CaseSpec> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    if (line.empty() || line[0] == '#') continue;
    out.push_back(parse_case(line));
    require(out.back().id == static_cast<int>(out.size()) - 1,
            "matrix ids must be 0, 1, 2, ...: found ", out.back().id, " at position ",
            out.size() - 1);
  }
  return out;
}

}  // namespace mac::verify
