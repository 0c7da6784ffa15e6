"""Bad input is refused with one message naming the argument, the offending element or value
and what is allowed (docs/cli.md)."""
import numpy as np
import pytest

import macattn


def arrays(T=5, hq=4, hkv=2, d=64):
    z = np.zeros
    return z((T, hq, d), np.float32), z((T, hq, d), np.float32), z((T, hkv, d), np.float32), \
        z((T, hkv, d), np.float32)


def test_float64_that_is_not_bf16_names_argument_and_element():
    q_pre, q_post, k, v = arrays()
    q_post = q_post.astype(np.float64)
    q_post[1, 2, 3] = 0.1
    with pytest.raises(macattn.InputError,
                       match=r"q_post: element \[1, 2, 3\] = 0\.1.*\(float64\) is not BF16-exact"):
        macattn.Layer(q_pre, q_post, k, v)
    # float64 holding BF16 values is exact: accepted.
    q_post[1, 2, 3] = 0.5
    assert macattn.Layer(q_pre, q_post, k, v).q_post[1, 2, 3] == 0.5


def test_float32_that_is_not_bf16_and_non_finite_values():
    q_pre, q_post, k, v = arrays()
    k[4, 1, 63] = np.float32(1.0 + 2 ** -10)
    with pytest.raises(macattn.InputError, match=r"k: element \[4, 1, 63\] = .* not BF16-exact"):
        macattn.Layer(q_pre, q_post, k, v)
    k[4, 1, 63] = np.nan
    with pytest.raises(macattn.InputError, match=r"k: element \[4, 1, 63\] = nan .*not finite"):
        macattn.Layer(q_pre, q_post, k, v)


def test_shapes_and_dtypes_are_named():
    q_pre, q_post, k, v = arrays()
    with pytest.raises(macattn.InputError,
                       match=r"q_post: shape \[5, 4\] where \[T, Hq, D\] = \[5, 4, 64\]"):
        macattn.Layer(q_pre, q_post[:, :, 0], k, v)
    with pytest.raises(macattn.InputError, match=r"v: dtype int64 where float32"):
        macattn.Layer(q_pre, q_post, k, v.astype(np.int64))
    with pytest.raises(macattn.InputError, match="head_dim = 48 is not supported"):
        macattn.Layer(*(a[..., :48] for a in arrays()))
    with pytest.raises(macattn.InputError, match="o2: shape"):
        macattn.merge(np.zeros(64), 0.0, np.zeros(32), 0.0)
    with pytest.raises(macattn.InputError, match="lse2: dtype float64 where float32"):
        macattn.merge(np.zeros(64, np.float32), np.float32(0), np.zeros(64, np.float32),
                      np.float64(0))
    with pytest.raises(macattn.InputError, match="x: dtype float64 where float32.*rounded twice"):
        macattn.round_bf16(np.zeros(3))


def test_stepper_refuses_bad_parameters_and_positions(golden):
    L, s = golden.layers[0], golden.meta.softmax_scale
    with pytest.raises(macattn.InputError, match="tau = 1.5 must be finite and < 1"):
        macattn.Stepper(L, s, macattn.MacParams(tau=1.5))
    with pytest.raises(macattn.InputError, match="ring M = 0 must be >= 1"):
        macattn.Stepper(L, s, macattn.MacParams(ring=0))
    with pytest.raises(macattn.InputError, match="variant 'fast' is not one of: split, downdate"):
        macattn.Stepper(L, s, variant="fast")
    with pytest.raises(macattn.InputError, match="MacParams: no field 'rings'"):
        macattn.MacParams(rings=3)
    st = macattn.Stepper(L, s, macattn.MacParams(gen_min=0))
    st.prefill(10)
    st.step(10)
    with pytest.raises(macattn.InputError, match=r"decode position m = 10 must be in \(10, 384\)"):
        st.step(10)
    with pytest.raises(macattn.InputError, match="make one with Stepper.incremental"):
        st.append(*(a[0] for a in arrays()))
    with pytest.raises(macattn.InputError, match="layer: a macattn.Layer is required"):
        macattn.Stepper(np.zeros(3), s)


def test_incremental_stepper_refuses_positions_past_its_capacity():
    inc = macattn.Stepper.incremental(4, 2, 64, max_tokens=3, softmax_scale=0.125)
    q_pre, q_post, k, v = arrays(T=3)
    inc.append(q_pre, q_post, k, v)
    with pytest.raises(macattn.InputError, match=r"positions \[3, 4\) exceed max_tokens = 3"):
        inc.append(q_pre[0], q_post[0], k[0], v[0])
    with pytest.raises(macattn.InputError, match=r"k: shape \[2, 32\] where \[Hkv, D\] = \[2, 64\]"):
        macattn.Stepper.incremental(4, 2, 64, 4, 0.125).append(q_pre[0], q_post[0],
                                                               k[0][:, :32], v[0])


def test_files_are_checked(golden, tmp_path):
    from conftest import GOLDEN_RUN
    with pytest.raises(macattn.InputError, match="synth_small_run.h5"):
        macattn.read_trace(GOLDEN_RUN)
    with pytest.raises(macattn.InputError):
        macattn.read_run_dump(str(tmp_path / "missing.h5"))


def test_oracle_refuses_an_impossible_decision(golden):
    L, s = golden.layers[0], golden.meta.softmax_scale
    orc = macattn.oracle.MacOracle(L, s, macattn.MacParams(gen_min=0, ring=16), 100)
    with pytest.raises(macattn.InputError):
        orc.step(100, np.array([True, False, False, False]), np.array([10, -1, -1, -1]))


@pytest.mark.skipif(macattn.cuda.built_with_cuda(), reason="built with the CUDA kernels")
def test_cuda_calls_without_the_kernels_raise_no_cuda_error():
    assert not macattn.cuda.device_present()
    with pytest.raises(macattn.NoCudaError, match="without CUDA"):
        macattn.cuda.Engine(1, 4, 2, 64)
