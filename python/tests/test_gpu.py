"""The torch ops on the GPU (skipped without torch with CUDA, a device, or macattn built with
the kernels): decisions equal the CPU reference's, outputs within semantics §4's tolerance of
the FP64 oracle of the same decisions, outputs equal the C++ API's bit for bit, 64 steps
captured in a CUDA graph and replayed, and torch.compile of a function calling
decode_step.

The case is the golden trace's layer 0 (D = 64, Hq = 4, Hkv = 2; data/golden), paged 16
tokens a page: prompt P = 256, ring M = 128, tail r = 32, gen_min 0, τ = 0.45, then the 64
decode steps m = 256 ... 319 (hits and misses both occur: test_reference.py shows it on
the same configuration)."""
import numpy as np
import pytest

import macattn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)
if not macattn.cuda.built_with_cuda():
    pytest.skip("macattn was built without the CUDA kernels (pip install with nvcc and torch "
                "with CUDA in the build environment)", allow_module_level=True)

from macattn import torch_ops  # noqa: E402  (registers torch.ops.macattn.*)

P, M, R_TAIL, STEPS, PAGE = 256, 128, 32, 64, 16
PARAMS = dict(tau=0.45, ring=M, tail=R_TAIL, sinks=0, gen_min=0)
# docs/semantics.md §4: CUDA vs the FP64 oracle of the same decisions, relative L2 per (step, head).
OUT_TOL = 1e-2
# The LSE is accumulated in FP32 over at most 320 keys of BF16 inputs; 1e-4 (absolute, for
# |L| of order 1-10) leaves two orders of magnitude above FP32 rounding of such sums.
LSE_TOL = 1e-4


def bf16(a):
    """A BF16-exact float32 numpy array as a CUDA bfloat16 tensor (exact)."""
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda").to(torch.bfloat16)


class Case:
    """The paged KV of the layer and the queries of every position, on the GPU."""

    def __init__(self, golden):
        self.layer, self.scale = golden.layers[0], golden.meta.softmax_scale
        L = self.layer
        T, Hkv, D = L.tokens, L.num_kv_heads, L.head_dim
        pages = (T + PAGE - 1) // PAGE
        k = np.zeros((pages * PAGE, Hkv, D), np.float32)
        v = np.zeros_like(k)
        k[:T], v[:T] = L.k, L.v
        self.k_cache = bf16(k.reshape(pages, PAGE, Hkv, D))
        self.v_cache = bf16(v.reshape(pages, PAGE, Hkv, D))
        self.page_table = torch.arange(pages, dtype=torch.int32, device="cuda")[None]
        self.q_post, self.q_pre = bf16(L.q_post), bf16(L.q_pre)  # [T, Hq, D]
        self.slot = torch.zeros(1, dtype=torch.int32, device="cuda")

    def state(self):
        s = torch_ops.MacDecodeState(num_slots=1, num_q_heads=self.layer.num_q_heads,
                                     num_kv_heads=self.layer.num_kv_heads,
                                     head_dim=self.layer.head_dim, max_batch=1,
                                     softmax_scale=self.scale, max_context=self.layer.tokens,
                                     **PARAMS)
        first = max(0, P - M)
        s.prefill(self.q_post[first:P][None], self.q_pre[first:P][None], self.k_cache,
                  self.v_cache, self.page_table, [first], [0])
        return s

    def kv_len(self, m):
        return torch.tensor([m + 1], dtype=torch.int32, device="cuda")

    def step(self, s, m):
        return s.decode_step(self.q_post[m:m + 1], self.q_pre[m:m + 1], self.k_cache,
                             self.v_cache, self.page_table, self.kv_len(m), self.slot)


@pytest.fixture(scope="module")
def case(golden):
    return Case(golden)


def reference(case):
    """The CPU reference stepper (FP32, production ring: BF16 o, FP32 L, as the GPU's) and
    the FP64 oracle, prefilled as the GPU state is."""
    params = macattn.MacParams(**PARAMS)
    st = macattn.Stepper(case.layer, case.scale, params)
    st.prefill(P)
    return st, macattn.oracle.MacOracle(case.layer, case.scale, params, P)


def check_against_reference(m, res, st, orc):
    out, lse, hit, match_pos, d2, keys = (t.cpu() for t in res)
    ref = st.step(m)
    np.testing.assert_array_equal(hit[0].numpy().astype(bool), ref.hit, err_msg=f"m={m}")
    np.testing.assert_array_equal(match_pos[0].numpy(), ref.match_pos)
    np.testing.assert_array_equal(d2[0].numpy(), ref.d2)  # canonical FP32 d2: bit for bit
    np.testing.assert_array_equal(keys[0].numpy(), ref.keys_read)
    o = orc.step(m, ref.hit, ref.match_pos)
    ox, lx = o.out
    got = out[0].float().numpy().astype(np.float64)
    rel = np.linalg.norm(got - ox, axis=1) / np.linalg.norm(ox, axis=1)
    assert rel.max() <= OUT_TOL, (m, rel)
    assert np.abs(lse[0].numpy() - lx).max() <= LSE_TOL, m
    return ref.hit


def test_decode_step_follows_the_reference(case):
    s = case.state()
    st, orc = reference(case)
    hits = 0
    for m in range(P, P + STEPS):
        hits += check_against_reference(m, case.step(s, m), st, orc).sum()
    assert 0 < hits < STEPS * case.layer.num_q_heads


def test_ops_equal_the_cpp_api_bit_for_bit(case):
    """decode_step, full_attention and prefill_entries against mac::cuda::Engine called
    directly with DecodeParams filled here (not by the ops' code)."""
    a, b = case.state(), case.state()
    eng = torch_ops.engine_object(b.engine)
    Hq, D = case.layer.num_q_heads, case.layer.head_dim
    for m in range(P, P + 8):
        res = case.step(a, m)
        p = macattn.cuda.DecodeParams()
        p.batch = 1
        p.q_post, p.q_pre = case.q_post[m:m + 1].data_ptr(), case.q_pre[m:m + 1].data_ptr()
        p.k_cache, p.v_cache = case.k_cache.data_ptr(), case.v_cache.data_ptr()
        p.num_pages, p.page_size = case.k_cache.shape[0], PAGE
        p.page_table, p.max_pages_per_row = case.page_table.data_ptr(), case.page_table.shape[1]
        kv_len = case.kv_len(m)
        p.kv_len, p.slot, p.num_slots = kv_len.data_ptr(), case.slot.data_ptr(), 1
        p.softmax_scale = case.scale
        p.tau, p.ring, p.tail, p.sinks, p.gen_min = (PARAMS[k] for k in
                                                     ("tau", "ring", "tail", "sinks", "gen_min"))
        p.ring_q_pre, p.ring_o, p.ring_lse = (b.ring_q_pre.data_ptr(), b.ring_o.data_ptr(),
                                              b.ring_lse.data_ptr())
        p.ready, p.epoch_a, p.epoch_b = (b.ready.data_ptr(), b.epoch_a.data_ptr(),
                                         b.epoch_b.data_ptr())
        out = torch.empty((1, Hq, D), dtype=torch.bfloat16, device="cuda")
        lse = torch.empty((1, Hq), dtype=torch.float32, device="cuda")
        hit = torch.empty((1, Hq), dtype=torch.int8, device="cuda")
        mp = torch.empty((1, Hq), dtype=torch.int64, device="cuda")
        d2 = torch.empty((1, Hq), dtype=torch.float32, device="cuda")
        kr = torch.empty((1, Hq), dtype=torch.int32, device="cuda")
        p.out, p.lse = out.data_ptr(), lse.data_ptr()
        p.diag_hit, p.diag_match_pos, p.diag_d2, p.diag_keys_read = (
            hit.data_ptr(), mp.data_ptr(), d2.data_ptr(), kr.data_ptr())
        eng.mac_step(p, torch.cuda.current_stream().cuda_stream)
        for x, y in zip(res, (out, lse, hit, mp, d2, kr)):
            assert torch.equal(x.view(torch.int8) if x.dtype == torch.bfloat16 else x,
                               y.view(torch.int8) if y.dtype == torch.bfloat16 else y)
        for x, y in ((a.ring_q_pre, b.ring_q_pre), (a.ring_o, b.ring_o),
                     (a.ring_lse, b.ring_lse)):
            assert torch.equal(x, y)
        # full attention, the same way.
        fo, fl = a.full_attention(case.q_post[m:m + 1], case.k_cache, case.v_cache,
                                  case.page_table, kv_len)
        eng.full_attention(p, torch.cuda.current_stream().cuda_stream)
        assert torch.equal(fo.view(torch.int16), out.view(torch.int16))
        assert torch.equal(fl, lse)
        ex_o, ex_l = macattn.oracle.full_attention(case.layer, case.scale, m)
        rel = np.linalg.norm(fo[0].float().cpu().numpy() - ex_o, axis=1) / \
            np.linalg.norm(ex_o, axis=1)
        assert rel.max() <= OUT_TOL


def test_cuda_graph_capture_and_replay_64_steps(case):
    """One decode_step captured by torch.cuda.graph on static inputs, replayed for 64
    positions (the inputs refilled before each replay): the same results, bit for bit, as
    the op run eagerly on a second state, and the reference's decisions."""
    g_state, e_state = case.state(), case.state()
    Hq, D = case.layer.num_q_heads, case.layer.head_dim
    q_post = torch.empty((1, Hq, D), dtype=torch.bfloat16, device="cuda")
    q_pre = torch.empty_like(q_post)
    kv_len = torch.empty(1, dtype=torch.int32, device="cuda")

    def fill(m):
        q_post.copy_(case.q_post[m:m + 1])
        q_pre.copy_(case.q_pre[m:m + 1])
        kv_len.fill_(m + 1)

    # Warm-up on a side stream (torch's recipe), on a throwaway state: a step writes entries.
    warm = case.state()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fill(P)
        warm.decode_step(q_post, q_pre, case.k_cache, case.v_cache, case.page_table, kv_len,
                         case.slot)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    fill(P)
    with torch.cuda.graph(graph):
        static = g_state.decode_step(q_post, q_pre, case.k_cache, case.v_cache,
                                     case.page_table, kv_len, case.slot)
    # Capture launches nothing: the state is untouched until the first replay.
    st, orc = reference(case)
    for m in range(P, P + STEPS):
        fill(m)
        graph.replay()
        eager = case.step(e_state, m)
        for x, y in zip(static, eager):
            assert torch.equal(x.view(torch.int16) if x.dtype == torch.bfloat16 else x,
                               y.view(torch.int16) if y.dtype == torch.bfloat16 else y), m
        check_against_reference(m, [t.clone() for t in static], st, orc)
    assert torch.equal(g_state.ring_o.view(torch.int16), e_state.ring_o.view(torch.int16))
    assert torch.equal(g_state.ring_lse, e_state.ring_lse)


def test_torch_compile_of_a_function_calling_decode_step(case):
    a, b = case.state(), case.state()

    def f(s, q_post, q_pre, kv_len):
        out, lse, hit, *_ = torch.ops.macattn.decode_step(
            s.engine, q_post, q_pre, case.k_cache, case.v_cache, case.page_table, kv_len,
            case.slot, s.ring_q_pre, s.ring_o, s.ring_lse, s.ready, s.epoch_a, s.epoch_b,
            s.softmax_scale, s.tau, s.tail, s.sinks, s.gen_min)
        return out.float() * 2.0, lse + 1.0, hit

    compiled = torch.compile(f, fullgraph=True)
    for m in range(P, P + 4):
        args = (case.q_post[m:m + 1], case.q_pre[m:m + 1], case.kv_len(m))
        x, y = compiled(a, *args), f(b, *args)
        for u, w in zip(x, y):
            assert torch.equal(u, w), m
    assert torch.equal(a.ring_o.view(torch.int16), b.ring_o.view(torch.int16))
    assert torch.equal(a.ring_lse, b.ring_lse)


def test_bad_inputs_are_refused_naming_the_tensor(case):
    s = case.state()
    m = P
    with pytest.raises(macattn.InputError, match="q_pre: dtype torch.float32"):
        s.decode_step(case.q_post[m:m + 1], case.q_pre[m:m + 1].float(), case.k_cache,
                      case.v_cache, case.page_table, case.kv_len(m), case.slot)
    with pytest.raises(macattn.InputError, match="kv_len: dtype torch.int64"):
        s.decode_step(case.q_post[m:m + 1], case.q_pre[m:m + 1], case.k_cache, case.v_cache,
                      case.page_table, case.kv_len(m).long(), case.slot)
    with pytest.raises(macattn.InputError, match="max_batch|batch"):
        s.decode_step(case.q_post[m:m + 2], case.q_pre[m:m + 2], case.k_cache, case.v_cache,
                      case.page_table.expand(2, -1).contiguous(), case.kv_len(m).repeat(2),
                      case.slot.repeat(2))
