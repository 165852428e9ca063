"""The serving-condition registry (eagle_nb/conditions/registry.py) on the code pair: every entry
changes only the wiring fields it declares (or refuses this pair, saying why), `Setting` checks and
orders condition names, bad input is refused by name, and a temporary entry is picked up by the
CLI, the doctor and the catalogue with nothing else changed."""
from __future__ import annotations

import pytest
import torch

from eagle_nb.cli.main import build_parser
from eagle_nb.conditions import registry as C
from eagle_nb.conditions.condition_entry import WORKLOAD, Condition, ConditionError
from eagle_nb.conditions.vocab_mask import MaskedHead
from eagle_nb.doctor import catalogue
from eagle_nb.doctor.run import doctor
from eagle_nb.experiment.faults import FAULTS
from eagle_nb.experiment.setting import Setting
from helpers import wiring_changes
from eagle_nb.io.paths import CODE_DRAFTER
from eagle_nb.io.prompts import Chat, PromptError, read_prompts
from helpers import code_pair, code_prompts

NEEDS_TEMPLATE = {"template-no-generation-prompt", "template-system-prompt"}  # the code tokenizer has none


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


@pytest.mark.parametrize("name", C.names())
def test_each_condition_changes_only_what_it_declares(pair, name):
    """Applied to the healthy wiring, a condition changes exactly the fields its entry names and
    notes its story, leaving the pair's target and drafter untouched; the two template modes that
    render the tokenizer's own template are refused on the code tokenizer (it has none), naming
    the reason, before any prompt runs."""
    healthy = pair.wiring()
    before = {k: v.clone() for k, v in pair.target.state_dict().items()}
    if name in NEEDS_TEMPLATE:
        with pytest.raises(ConditionError, match="has none"):
            pair.wiring(Setting(conditions=(name,)))
        return
    w = pair.wiring(Setting(conditions=(name,)))
    assert wiring_changes(healthy, w) == set(C.entry(name).fields_changed)
    assert any(n.startswith(f"condition {name}:") for n in w.notes)
    assert all(torch.equal(v, before[k]) for k, v in pair.target.state_dict().items())
    assert pair.wiring().target is pair.target and pair.wiring().drafter is pair.drafter


def test_setting_checks_orders_and_labels_conditions():
    """Names are put in registry order (so two spellings are equal), unknown names and a bare
    string are refused naming the known ones, two conditions setting the same field are refused,
    fault and condition names never collide, and the label and dict carry the conditions."""
    a = Setting(conditions=("vocabulary-coverage", "template-raw"))
    assert a == Setting(conditions=("template-raw", "vocabulary-coverage"))
    assert a.conditions == ("template-raw", "vocabulary-coverage")
    assert a.label == "template-raw + vocabulary-coverage" and a.as_dict()["conditions"] == list(a.conditions)
    assert Setting(faults=("fc-bypass",), conditions=("target-quantized",)).label == "fc-bypass + target-quantized"
    with pytest.raises(ValueError, match="unknown conditions.*known: .*template-raw"):
        Setting(conditions=("template-rw",))
    with pytest.raises(ValueError, match="tuple of names"):
        Setting(conditions="template-raw")
    with pytest.raises(ValueError, match="both set the 'template'"):
        Setting(conditions=("template-raw", "chat-template-mismatch"))
    assert not {f.name for f in FAULTS} & set(C.names())
    with pytest.raises(ValueError, match="unique"):
        with C.registered(C.entry("template-raw")):
            pass


def test_served_prompts_keep_a_chat_and_wrap_its_last_turn(pair):
    """The loop- and context-conditions wrap a prompt's text; a Chat stays a Chat (its template is
    still applied) with only its last user turn wrapped."""
    w = pair.wiring(Setting(conditions=("loop-inflated-workload",)))
    chat = Chat.user("hi", system="be brief")
    served = w.served(chat)
    assert isinstance(served, Chat) and served.messages[0] == ("system", "be brief")
    assert served.text.count("hi") == 4 and w.served("def f():").count("def f():") == 4


def test_masked_head_never_proposes_the_dropped_ids():
    """The vocabulary condition's head keeps the first `keep` logits exactly and sets the rest to
    -inf, so the argmax (and any sample) is a kept id; a `keep` outside 1..out-1 is refused."""
    head = torch.nn.Linear(8, 10, bias=False)
    m = MaskedHead(head, 4)
    x = torch.randn(3, 8)
    y = m(x)
    assert torch.equal(y[:, :4], head(x)[:, :4]) and torch.isinf(y[:, 4:]).all()
    assert (y.argmax(-1) < 4).all() and m.weight is head.weight
    with pytest.raises(ValueError, match="keep"):
        MaskedHead(head, 10)


def test_bad_input_is_refused_by_name(pair, tmp_path):
    """A prompt file mixing chat and raw entries, a prompt past the target's context under
    context-past-training (its prefix fills three quarters of it), and a condition on a recording
    are each refused with a message saying what and why."""
    f = tmp_path / "mixed.jsonl"
    f.write_text('{"prompt": "def f(x):"}\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(PromptError, match="separate files"):
        read_prompts(f)
    long = "x = 1\n" * 400
    with pytest.raises(ValueError, match="max_position_embeddings is 1024.*Nothing was decoded"):
        pair.run([long], conditions=("context-past-training",), max_new_tokens=8, progress=False)
    from eagle_nb.experiment.wiring import Builds
    recorded = Builds(tmp_path, pair.drafter, tokenizer=pair.tokenizer)      # a recording's: a path
    for name in ("target-quantized", "context-past-training"):
        with pytest.raises(ConditionError, match="needs the loaded target"):
            C.entry(name).apply(pair.wiring(), recorded)
    from eagle_nb.cli.speculate import run
    a = build_parser().parse_args(["speculate", "--features", str(tmp_path), "--condition", "template-raw"])
    with pytest.raises(ValueError, match="needs the live target"):
        run(a)


# -- a temporary entry, picked up by every consumer -------------------------------------------------
def _doubled(w, b):
    return w.but(prompt_format="{prompt}\n{prompt}")


TEMP = Condition("test-prompt-doubled", WORKLOAD, "the prompt is sent twice", "tests only",
                 "send it once", _doubled, "prompt_format", "none", "tau moves", "pytest")


def test_a_temporary_condition_reaches_the_cli_the_doctor_and_the_catalogue(pair):
    """Registered for a `with` block only, the entry is listed by `speculate --help` and parsed
    by `--condition`; the doctor measures it, ranks it as a serving condition beside the healthy
    pair and, given its own tau as the observation, names it in the verdict; the catalogue gives it a row with tau, per-position and a 95% interval that holds
    tau. Outside the block the CLI refuses the name again."""
    prompts = code_prompts(2)
    with C.registered(TEMP):
        parser = build_parser()
        helps = {a.dest: a.help for a in parser._subparsers._group_actions[0].choices["speculate"]._actions}
        assert "test-prompt-doubled" in helps["condition"]
        a = parser.parse_args(["speculate", "--prompt", "x", "--condition", "test-prompt-doubled"])
        assert a.condition == ["test-prompt-doubled"]
        res = pair.run(prompts, conditions=(TEMP.name,), depth=3, max_new_tokens=8, progress=False)
        d = doctor(CODE_DRAFTER, pair=pair, prompts=prompts, depth=3, max_new_tokens=8, faults=(),
                   conditions=(TEMP.name,), observed_tau=res.metrics.accept_length, progress=False)
        hyp = {h.fault: h for h in d.hypotheses}
        assert hyp[TEMP.name].kind.startswith("serving condition") and hyp[TEMP.name].serving_check == "pytest"
        assert abs(hyp[TEMP.name].predicted["tau"] - res.metrics.accept_length) < 1e-9
        assert d.verdict.cause == TEMP.name and "fits the serving condition" in d.verdict.summary
        assert any(n.startswith("plan: 2.") and TEMP.name in n for n in d.notes), d.notes
        cat = catalogue.measure(pair, prompts, depth=3, temperatures=(0.0,), max_new_tokens=8,
                                faults=(), conditions=(TEMP.name,), progress=False)
        row, = cat["conditions"]
        r = row["results"]["0.0"]
        lo, hi = catalogue.interval(r)
        assert row["condition"] == TEMP.name and lo <= r["tau"] <= hi and len(r["per_position"]) == 3
        assert f"`{TEMP.name}`" in catalogue.conditions_markdown(cat)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["speculate", "--prompt", "x", "--condition", "test-prompt-doubled"])


def test_the_doctor_says_when_it_cannot_measure_a_condition():
    """Static only (nothing runs), the conditions asked for are named as not measured, never
    dropped without a word."""
    d = doctor(CODE_DRAFTER, dynamic=False, conditions=("target-quantized",), progress=False)
    assert any("target-quantized not measured" in n for n in d.notes), d.notes
