"""The shipped target: loads offline through the Auto classes, is really trained, and its wrapper
copy computes the same function."""
import json
import math

import pytest
import torch

from eagle_nb.io.prompts import read_prompts
from eagle_nb.model.targets import load_target, make_wrapper
from eagle_nb.io.paths import CODE_DIR, CODE_PROMPTS, CODE_TARGET

METRICS = json.loads((CODE_DIR / "target_metrics.json").read_text())
SAMPLE = (CODE_DIR / "heldout_sample.txt").read_text()


@pytest.fixture(scope="module")
def shipped():
    return load_target(CODE_TARGET, device="cpu")


def test_loads_through_auto_classes_offline(shipped):
    """AutoModelForCausalLM/AutoTokenizer load the shipped checkpoint with no network and no
    remote code: a stock LlamaForCausalLM with >= 8 layers and safetensors weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(CODE_TARGET)
    tok = AutoTokenizer.from_pretrained(CODE_TARGET)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers >= 8
    assert (CODE_TARGET / "model.safetensors").exists()
    assert len(tok) == model.config.vocab_size


def test_heldout_perplexity_below_recorded_bound(shipped):
    """Perplexity on held-out text (files never trained on) is at most the recorded value (+2%)
    and at most 1/5 of the unigram baseline's: the model really learned the language."""
    model, tok = shipped
    ids = tok(SAMPLE, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    T, losses = 256, []
    with torch.no_grad():
        for i in range(min(24, (len(ids) - 1) // T)):
            x = ids[i * T:(i + 1) * T + 1][None]
            logits = model(input_ids=x[:, :-1]).logits[0]
            losses.append(torch.nn.functional.cross_entropy(logits, x[0, 1:]).item())
    ppl = math.exp(sum(losses) / len(losses))
    assert ppl <= METRICS["heldout_sample_ppl"] * 1.02 + 0.05, ppl
    assert METRICS["val_ppl"] <= METRICS["unigram_val_ppl"] / 5


def test_tokenizer_round_trips_heldout_text(shipped):
    """Byte-level BPE: decode(encode(text)) == text for held-out source, prompts included."""
    _, tok = shipped
    for text in [SAMPLE[:20000], *read_prompts(CODE_PROMPTS)]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text


def test_eval_prompts_come_from_heldout_files():
    """Every evaluation prompt names a source file that the deterministic split holds out."""
    from eagle_nb.train.corpus import is_heldout
    rows = [json.loads(line) for line in CODE_PROMPTS.read_text().splitlines() if line.strip()]
    assert len(rows) >= 8
    assert all(is_heldout(r["source"]) for r in rows)


def test_wrapper_copy_matches_plain_model(shipped):
    """The Llava-wrapped copy nests the decoder under `language_model` and gives identical
    language-model logits on the same ids."""
    model, tok = shipped
    wrapper = make_wrapper(model)
    assert type(wrapper).__name__ == "LlavaForConditionalGeneration"
    assert not hasattr(wrapper.model, "layers") and hasattr(wrapper.model.language_model, "layers")
    ids = tok(read_prompts(CODE_PROMPTS)[0], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, wrapper(input_ids=ids).logits
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_greedy_decoding_gives_its_tokens_and_its_time(shipped):
    """Cached greedy decoding of the shipped target gives the tokens asked for and the seconds it
    took (its speed budget is measured by benchmarks/budgets.py, not asserted here)."""
    from eagle_nb.loop.chain import greedy_reference
    model, tok = shipped
    ids = tok("def f(x):\n", return_tensors="pt")["input_ids"]
    toks, seconds = greedy_reference(model, ids, max_new_tokens=20)
    assert len(toks) == 20 and seconds > 0
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1]:].tolist()
    assert toks == want
