"""The static context check (eagle_nb.conditions.context_limits) on hand-made configs in the layouts
it reads: flat, nested, `rope_parameters`, objects."""
from __future__ import annotations

from eagle_nb.model.config import DrafterConfig
from eagle_nb.conditions.context_limits import check_context, context_fields

TARGET = {"max_position_embeddings": 8192, "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}


def test_fields_in_every_layout():
    """Flat rope_theta/rope_scaling, transformers 5's rope_parameters (default type = no scaling),
    a text_config and a speculators transformer_layer_config are read alike."""
    assert context_fields(TARGET) == {"max_position_embeddings": 8192, "rope_theta": 100000.0,
                                      "rope_scaling": None}
    yarn = {"rope_parameters": {"rope_theta": 1e6, "rope_type": "yarn", "factor": 4.0},
            "max_position_embeddings": 32768}
    assert context_fields({"text_config": yarn})["rope_scaling"] == {"rope_type": "yarn", "factor": 4.0}
    assert context_fields({"transformer_layer_config": {"max_position_embeddings": 2048}})[
        "max_position_embeddings"] == 2048


def test_a_matching_drafter_is_ok():
    """Same context and RoPE: status ok, no findings; a DrafterConfig object works."""
    d = DrafterConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, vocab_size=100, draft_vocab_size=50,
                      max_position_embeddings=8192, rope_theta=100000.0)
    chk = check_context(d, TARGET)
    assert chk.status == "ok" and chk.findings == [] and chk.drafter_limit == 8192


def test_short_context_rope_and_workload_findings():
    """A drafter declaring 2048 against 8192, trained on 400 tokens, with another theta and no
    YaRN where the target has it: one finding each, citing its report; the workload count uses the
    trained length."""
    target = {"max_position_embeddings": 8192, "rope_theta": 1e6,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    chk = check_context({"max_position_embeddings": 2048, "rope_theta": 1e4}, target,
                        trained_length=400, workload_lengths=[100, 500, 3000])
    text = "\n".join(chk.findings)
    assert chk.status == "warn" and len(chk.findings) == 5 and chk.drafter_limit == 400
    assert "sglang #6783" in text and "speculators PR #684" in text and "Automodel PR #2399" in text
    assert "2 of 3 requests are longer than the drafter's 400 tokens (longest 3000)" in text
    assert chk.as_dict()["drafter_limit"] == 400
