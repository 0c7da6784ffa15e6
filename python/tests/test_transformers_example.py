"""python/examples/transformers_mac.py in a small random Llama on the CPU reference (skipped
without torch and transformers): the per-layer switch and the decode steps it runs."""
import sys

import pytest

import macattn
from conftest import ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(ROOT / "python" / "examples"))
import transformers_mac as tm  # noqa: E402


def generate(model, ids, new=10):
    with torch.inference_mode():
        return model.generate(ids, max_new_tokens=new, do_sample=False, output_logits=True,
                              return_dict_in_generate=True)


@pytest.fixture
def model_and_prompt():
    model = tm.tiny_llama()
    model.set_attn_implementation("sdpa")
    ids = torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(1)).repeat(1, 4)
    return model, ids


def test_layers_switched_off_are_sdpa_exactly(model_and_prompt):
    model, ids = model_and_prompt
    ref = generate(model, ids)
    mac = tm.MacAttention(layers=[], params=macattn.MacParams(gen_min=0)).attach(model)
    got = generate(model, ids)
    assert mac.stats == {}
    for x, y in zip(got.logits, ref.logits):
        assert torch.equal(x, y)


def test_mac_runs_the_decode_steps_of_the_layers_listed(model_and_prompt):
    model, ids = model_and_prompt
    ref = generate(model, ids)
    mac = tm.MacAttention(layers=[1], backend="reference",
                          params=macattn.MacParams(tau=0.45, ring=64, tail=16, gen_min=0))
    mac.attach(model)
    got = generate(model, ids)
    assert list(mac.stats) == [1]                       # layer 0 stayed SDPA
    assert mac.stats[1]["steps"] == 9                   # every decode step after the first token
    assert mac.stats[1]["hits"] > 0                     # the repeated prompt is matched
    assert torch.equal(got.sequences, ref.sequences)
    assert all(torch.isfinite(x).all() for x in got.logits)
