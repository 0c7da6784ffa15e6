#!/usr/bin/env bash
# Nsight Compute profile of the full-attention decode kernels (schedule, amend, combine) at
# three shapes, and of torch's cuDNN SDPA at the largest, for placing the gap. One device
# call; text reports in $OUT. Clocks are left alone (--clock-control none, device METHOD.md).
# Usage: OUT=dir [MAC_DEVICE_COPY=1] scripts/device/profile.sh
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
scripts/device/build_cuda.sh || exit 1
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
METRICS="--metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,lts__t_sector_hit_rate.pct"
prof() {  # name batch ctx hkv
  timeout 150 ncu --clock-control none -k "regex:amend|combine|schedule" --launch-count 3 $SECTIONS $METRICS \
    build-dev/bin/mac-bench --mac 0 --batch "$2" --ctx "$3" --hkv "$4" --reps 1 --warmup 0 --csv /dev/null \
    > "$OUT/ncu_$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  grep -E "amend_kernel|combine_kernel|schedule_kernel|Duration|DRAM Throughput|dram__|Memory Throughput|Achieved Occupancy|No Eligible|Issued Warp" "$OUT/ncu_$1.txt" | head -40
}
prof b64_127k_h8 64 130048 8
prof b16_32k_h4 16 32768 4
prof b1_32k_h8 1 32768 8
# torch.empty launches no kernel, so the first kernels profiled are SDPA's own (values do
# not matter for the memory traffic).
cat > /tmp/sdpa_once.py <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
q = torch.empty(64, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.empty(64, 8, 130048, 128, device="cuda", dtype=torch.bfloat16)
v = torch.empty_like(k)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(2): o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
torch.cuda.synchronize()
PY
timeout 150 ncu --clock-control none --launch-count 3 $SECTIONS $METRICS python3 /tmp/sdpa_once.py > "$OUT/ncu_sdpa_b64_127k_h8.txt" 2>&1
echo "ncu sdpa rc=$?"
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|dram__|Achieved Occupancy|Registers|Block Size|Grid Size|Shared Memory Config" "$OUT/ncu_sdpa_b64_127k_h8.txt" | head -40
