"""``simulate``: one trace layer through the reference stepper and the FP64 oracle, step by
step, into a run dump: what ``mac-sim --dump`` writes, computed from Python."""
import math

from ._core import InputError, MacOracle, RunDump, Stepper, StepperConfig


def simulate(layer, softmax_scale: float, config: StepperConfig, steps: int = 0,
             oracle: bool = True, layer_index: int = 0, trace_source: str = "",
             on_step=None) -> RunDump:
    """Runs decode steps ``P .. P+steps-1`` (``P = config.prefill``; ``steps = 0``: to the
    end of the layer) and returns their run dump (docs/file-formats.md). With ``oracle`` the dump's
    ``exact_out``/``exact_lse`` hold FP64 full attention (else NaN). ``on_step(step,
    oracle_step)`` is called after every step (``oracle_step`` None without the oracle)."""
    P, T = config.prefill, layer.tokens
    if not 1 <= P < T:
        raise InputError(f"prefill P = {P} must be in [1, {T - 1}] (the layer has {T} tokens)")
    if steps < 0 or P + steps > T:
        raise InputError(f"steps = {steps} with prefill {P} runs past the layer's {T} tokens")
    S = steps if steps > 0 else T - P
    stepper = Stepper(layer, softmax_scale, config.params, variant=config.variant,
                      storage=config.storage, precision=config.precision)
    stepper.prefill(P, config.prefill_mode)
    orc = MacOracle(layer, softmax_scale, config.params, P) if oracle else None
    dump = RunDump(S, layer.num_q_heads, layer.head_dim)
    dump.config, dump.layer, dump.trace_source = config, layer_index, trace_source
    position, hit, match_pos, d2 = dump.position, dump.hit, dump.match_pos, dump.d2
    out, lse, kv = dump.out, dump.lse, dump.kv_tokens_read
    exact_out, exact_lse = dump.exact_out, dump.exact_lse
    if orc is None:
        exact_out[:] = exact_lse[:] = math.nan
    for i in range(S):
        m = P + i
        st = stepper.step(m)
        position[i] = m
        h = st.hit
        hit[i] = h
        match_pos[i] = st.match_pos
        d2[i] = st.d2
        out[i], lse[i] = st.out
        kv[i] = st.keys_read
        ost = None
        if orc is not None:
            ost = orc.step(m, h, st.match_pos)
            exact_out[i], exact_lse[i] = ost.exact
        if on_step is not None:
            on_step(st, ost)
    return dump
