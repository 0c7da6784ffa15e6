// What a conditional graph node costs around a decode step's kernels (tuning page §25).
//
// The one design family left for the batch-1 all-miss target needs two topologies of a MAC
// step chosen on the device at each replay: K1 first (the plans before the schedule, as on
// main) when the step before had a hit, and the amend kernel first with K1 beside it (a bet
// on no hit) otherwise. A CUDA graph can only choose between them with a conditional node
// (IF/ELSE, CUDA 12.8+), whose condition the step before sets (cudaGraphSetConditional).
// This program measures what such a node adds to a replay, and what a join (the combine
// waiting for both the amend kernel and a K1 beside it) costs against a plain chain, with
// stand-in kernels of the real grids' shapes that spin for fixed times (no memory traffic:
// it measures the graph's latencies only).
//
// Standalone: nvcc -arch=sm_90 -O2 -std=c++17 -o graph_conditional graph_conditional.cu
// Run: ./graph_conditional [reps]   (prints CSV:
// variant,k1_ns,amend_ns,combine_ns,median_us,p10_us,p90_us)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CU(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

enum Wait { kNoWait = 0, kWaitFirst = 1, kWaitLast = 2 };
enum SetMode { kSetNone = 0, kSetOne = 1, kSetToggle = 2 };

struct SetCond {
  cudaGraphConditionalHandle h;
  int mode;
  unsigned* counter;
};

// A stand-in for one of the step's kernels: waits for the grid before it (kWaitFirst, as the
// amend kernel and the combine do), releases its dependents, spins for `ns`, optionally
// waits only before it exits (kWaitLast: K1 beside the amend kernel, which must not end
// before it), and block 0 may set the graph's condition for the next replay.
__global__ void stand_in(int ns, int wait, SetCond sc) {
  if (wait == kWaitFirst) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < static_cast<unsigned long long>(ns)) {
  }
  if (wait == kWaitLast) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (sc.mode != kSetNone && blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned v = sc.mode == kSetOne ? 1u : ((*sc.counter)++ & 1u);
    cudaGraphSetConditional(sc.h, v);
  }
}

struct Shape {
  int grid, block, ns;
};

// pdl: launched as a programmatic dependent of the kernel before it in the stream.
void launch(cudaStream_t s, const Shape& k, bool pdl, int wait,
            SetCond sc = {0, kSetNone, nullptr}) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(k.grid);
  cfg.blockDim = dim3(k.block);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CU(cudaLaunchKernelEx(&cfg, stand_in, k.ns, wait, sc));
}

struct Step {
  Shape k1, amend, combine;
};

// main's order: K1, then the amend kernel and the combine, each a programmatic dependent.
void k1_first(cudaStream_t s, const Step& st, SetCond sc) {
  launch(s, st.k1, false, kNoWait);
  launch(s, st.amend, true, kWaitFirst);
  launch(s, st.combine, true, kWaitFirst, sc);
}

// §24's order: the amend kernel first, K1 its dependent (released as every amend block has
// started, waiting for it only before K1 exits), the combine after K1.
void amend_first(cudaStream_t s, const Step& st, SetCond sc) {
  launch(s, st.amend, false, kNoWait);
  launch(s, st.k1, true, kWaitLast);
  launch(s, st.combine, true, kWaitFirst, sc);
}

// The amend kernel first, K1 beside it (released as every amend block has started, never
// waiting), and the combine joining both: a full edge from each (pdl_join: the capture is
// asked for a programmatic one from K1 as well).
void amend_first_join(cudaStream_t s, const Step& st, bool pdl_join, cudaEvent_t ev) {
  launch(s, st.amend, false, kNoWait);
  CU(cudaEventRecord(ev, s));
  launch(s, st.k1, true, kNoWait);
  CU(cudaStreamWaitEvent(s, ev, 0));
  launch(s, st.combine, pdl_join, kWaitFirst);
}

struct Timing {
  double med, p10, p90;
};

Timing time_graph(cudaGraphExec_t ge, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  std::vector<double> us;
  const int warmup = 20;
  for (int i = 0; i < warmup + reps; ++i) {
    CU(cudaEventRecord(a, s));
    CU(cudaGraphLaunch(ge, s));
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, a, b));
    if (i >= warmup) us.push_back(1e3 * ms);
  }
  CU(cudaEventDestroy(a));
  CU(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10]};
}

cudaGraph_t capture(cudaStream_t s, const std::function<void()>& body) {
  cudaGraph_t g;
  CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CU(cudaStreamEndCapture(s, &g));
  return g;
}

// Captures `fill(stream)` into the existing graph `g` after `deps` (a conditional body, or
// the rest of a graph after its conditional node).
void capture_into(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                  const std::function<void()>& fill) {
  CU(cudaStreamBeginCaptureToGraph(s, g, deps, nullptr, n, cudaStreamCaptureModeThreadLocal));
  fill();
  cudaGraph_t out;
  CU(cudaStreamEndCapture(s, &out));
}

// A graph whose root is an IF node (size 1: then only; size 2: then/else) on a handle whose
// value the graph's own kernels set; returns the graph, the handle and the body graphs.
struct CondGraph {
  cudaGraph_t g;
  cudaGraphNode_t node;
  cudaGraphConditionalHandle h;
  cudaGraph_t body[2];
};

CondGraph cond_graph(unsigned size, unsigned default_value, unsigned flags) {
  CondGraph c{};
  CU(cudaGraphCreate(&c.g, 0));
  CU(cudaGraphConditionalHandleCreate(&c.h, c.g, default_value, flags));
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeConditional;
  np.conditional.handle = c.h;
  np.conditional.type = cudaGraphCondTypeIf;
  np.conditional.size = size;
  CU(cudaGraphAddNode(&c.node, c.g, nullptr, nullptr, 0, &np));
  for (unsigned i = 0; i < size; ++i) c.body[i] = np.conditional.phGraph_out[i];
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  int dev = 0;
  CU(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, dev));
  int drv = 0, rt = 0;
  CU(cudaDriverGetVersion(&drv));
  CU(cudaRuntimeGetVersion(&rt));
  std::printf(
      "# device: %s (%d SMs), driver %d, runtime %d; %d timed replays after 20 warm-up, each "
      "alone\n",
      prop.name, prop.multiProcessorCount, drv, rt, reps);
  std::printf("variant,k1_ns,amend_ns,combine_ns,median_us,p10_us,p90_us\n");
  cudaStream_t s, s2;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  unsigned* counter;
  CU(cudaMalloc(&counter, sizeof(unsigned)));
  CU(cudaMemset(counter, 0, sizeof(unsigned)));

  // Grids of the 1/32K/Hkv 4 step: K1 256 blocks of 256 threads, the amend kernel two blocks of
  // 128 threads per SM, the combine one block of 256 threads per query head (Hq = 32).
  const int amend_grid = 2 * prop.multiProcessorCount;
  const int durations[][3] = {{0, 0, 0}, {4000, 25000, 5000}};
  for (const auto& d : durations) {
    const Step st{{256, 256, d[0]}, {amend_grid, 128, d[1]}, {32, 256, d[2]}};
    auto report = [&](const char* name, cudaGraph_t g) {
      cudaGraphExec_t ge;
      const cudaError_t e = cudaGraphInstantiate(&ge, g, 0);
      if (e != cudaSuccess) {
        std::printf("%s,%d,%d,%d,instantiate failed: %s,,\n", name, d[0], d[1], d[2],
                    cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
      }
      const Timing t = time_graph(ge, s, reps);
      std::printf("%s,%d,%d,%d,%.2f,%.2f,%.2f\n", name, d[0], d[1], d[2], t.med, t.p10, t.p90);
      CU(cudaGraphExecDestroy(ge));
    };
    const SetCond none{0, kSetNone, nullptr};

    // 1. Plain chains, as main captures a step.
    report("k1_first", capture(s, [&] { k1_first(s, st, none); }));
    report("amend_first", capture(s, [&] { amend_first(s, st, none); }));
    report("amend_first_join", capture(s, [&] { amend_first_join(s, st, false, ev); }));
    {
      cudaGraph_t g;
      CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      amend_first_join(s, st, true, ev);
      const cudaError_t e = cudaStreamEndCapture(s, &g);
      if (e != cudaSuccess) {
        std::printf("amend_first_join_pdl,%d,%d,%d,capture failed: %s,,\n", d[0], d[1], d[2],
                    cudaGetErrorString(e));
        (void)cudaGetLastError();
      } else {
        report("amend_first_join_pdl", g);
      }
    }

    // 2. An IF node (then only, condition 1 at every launch) around K1 and the amend kernel;
    //    the combine after the node, in plain stream order (no programmatic edge can cross it).
    {
      CondGraph c = cond_graph(1, 1, cudaGraphCondAssignDefault);
      capture_into(s2, c.body[0], nullptr, 0, [&] {
        launch(s2, st.k1, false, kNoWait);
        launch(s2, st.amend, true, kWaitFirst);
      });
      capture_into(s, c.g, &c.node, 1, [&] { launch(s, st.combine, false, kWaitFirst); });
      report("if_then_k1_amend+combine", c.g);
    }

    // 3. The whole step in an IF/ELSE node: then = main's order, else = §24's; the combine sets
    //    the condition for the next replay: always 1 (then), or alternating (then, else, …).
    for (int mode : {kSetOne, kSetToggle}) {
      CondGraph c = cond_graph(2, 1, 0);
      const SetCond sc{c.h, mode, counter};
      capture_into(s2, c.body[0], nullptr, 0, [&] { k1_first(s2, st, sc); });
      capture_into(s2, c.body[1], nullptr, 0, [&] { amend_first(s2, st, sc); });
      report(mode == kSetOne ? "ifelse_step_then" : "ifelse_step_alternating", c.g);
    }
    // 3b. Same, else = the join (combine after both the amend kernel and K1).
    {
      CondGraph c = cond_graph(2, 1, 0);
      const SetCond sc{c.h, kSetToggle, counter};
      capture_into(s2, c.body[0], nullptr, 0, [&] { k1_first(s2, st, sc); });
      capture_into(s2, c.body[1], nullptr, 0, [&] {
        launch(s2, st.amend, false, kNoWait);
        CU(cudaEventRecord(ev, s2));
        launch(s2, st.k1, true, kNoWait);
        CU(cudaStreamWaitEvent(s2, ev, 0));
        launch(s2, st.combine, false, kWaitFirst, sc);
      });
      report("ifelse_step_alternating_join", c.g);
    }
  }
  CU(cudaDeviceSynchronize());
  std::printf("# done\n");
  return 0;
}
