#include "mac/ref/gate.hpp"

#include "mac/ref/common.hpp"

namespace mac {

GateConfig make_gate_config(const MacParams& p, int64_t num_q_heads, int64_t num_kv_heads,
                            int64_t head_dim) {
  GateConfig g;
  g.window = p.gate_window;
  g.probe = p.gate_probe;
  g.margin = p.gate_margin;
  g.min_hit = p.gate_min_hit;
  g.fixed_bytes = p.gate_fixed_bytes;
  g.num_q_heads = num_q_heads;
  g.num_kv_heads = num_kv_heads;
  g.head_dim = head_dim;
  g.ring = p.ring;
  g.tail = p.tail;
  g.sinks = p.sinks;
  return g;
}

void check_gate_config(const GateConfig& g, int64_t max_position) {
  require(gate_fits(g, max_position), "gate_window W = ", g.window,
          " with gate_margin = ", g.margin, " is too large for this layer (Hq ", g.num_q_heads,
          ", Hkv ", g.num_kv_heads, ", D ", g.head_dim, ", positions up to ", max_position,
          "): a window's byte sums times max(1000, margin) would exceed int64; use a smaller "
          "window or margin");
}

}  // namespace mac
