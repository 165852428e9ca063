"""Lazy target parts: a target's text config, embedding and lm_head read from its files without
loading the model or a tokenizer; peak memory independent of the target's size."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.checkpoints.save import save_drafter
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.io.target_parts import TargetParts, TargetPartsError, read_text_config
from eagle_nb.model.targets import make_wrapper
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
from helpers import peak_rss_mb, target_for, tiny_drafter, tiny_features, tiny_llama


def _no_tokenizer(d: Path) -> None:
    assert not any(d.glob("tokenizer*")), "the fixture must have no tokenizer files"


def test_sharded_target_without_tokenizer_gives_embedding_and_head(tmp_path):
    """A save_pretrained target split in several shards, no tokenizer: config, embedding and
    lm_head equal the model's, read tensor by tensor."""
    model = tiny_llama(num_layers=4)
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    _no_tokenizer(tmp_path)
    parts = TargetParts(tmp_path)
    assert (parts.config.vocab_size, parts.config.hidden_size, parts.config.num_hidden_layers) == (128, 32, 4)
    assert torch.equal(parts.embed_tokens(), model.get_input_embeddings().weight)
    assert torch.equal(parts.lm_head(), model.lm_head.weight)
    assert parts.embed_key() == "model.embed_tokens.weight" and parts.head_key() == "lm_head.weight"


def test_multimodal_wrapper_text_config_and_embedding(tmp_path):
    """A Llava wrapper: the text config sits under text_config, the embedding under
    model.language_model; the vision tower's tensors are never mistaken for it."""
    model = tiny_llama(num_layers=4)
    wrapper = make_wrapper(model)
    wrapper.save_pretrained(tmp_path)
    cfg = read_text_config(tmp_path)
    assert cfg.name.endswith("[text_config]") and cfg.num_hidden_layers == 4
    parts = TargetParts(tmp_path)
    assert "language_model" in parts.embed_key()   # saved as language_model.model.* by transformers 5
    assert torch.equal(parts.embed_tokens(), model.get_input_embeddings().weight)


def test_tied_embeddings_give_the_embedding_as_head(tmp_path):
    """tie_word_embeddings: the checkpoint has no lm_head tensor; lm_head() is the embedding."""
    model = tiny_llama(num_layers=2)
    model.config.tie_word_embeddings = True
    model.tie_weights()
    model.save_pretrained(tmp_path)
    parts = TargetParts(tmp_path)
    assert not any(k.startswith("lm_head") for k in parts.weight_map)
    assert torch.equal(parts.lm_head(), model.get_input_embeddings().weight)


def test_untied_target_without_head_is_an_error(tmp_path):
    """tie_word_embeddings=false and no lm_head tensor: an error naming the config field."""
    model = tiny_llama(num_layers=2)
    model.save_pretrained(tmp_path)
    sd = {k: v for k, v in model.state_dict().items() if not k.startswith("lm_head")}
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(TargetPartsError, match="tie_word_embeddings=false"):
        TargetParts(tmp_path).lm_head()


def test_errors_name_file_and_key(tmp_path):
    """Missing shard, wrong embedding shape, no config: each error names what is at fault."""
    model = tiny_llama(num_layers=2)
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    victim = index["weight_map"]["model.norm.weight"]
    (tmp_path / victim).unlink()
    with pytest.raises(TargetPartsError, match=victim):
        TargetParts(tmp_path)
    bad = tmp_path / "bad"
    model.save_pretrained(bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["hidden_size"] = 48
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(TargetPartsError, match=r"model\.embed_tokens\.weight.*\(128, 48\)"):
        TargetParts(bad).embed_tokens()
    with pytest.raises(TargetPartsError, match="no config.json"):
        (tmp_path / "empty").mkdir()
        TargetParts(tmp_path / "empty")


def test_pickled_bin_target_is_refused(tmp_path):
    """A pytorch_model.bin holding a pickled object (not plain tensors) is refused, not run."""
    model = tiny_llama(num_layers=2)
    model.config.save_pretrained(tmp_path)
    torch.save({"model.embed_tokens.weight": model.get_input_embeddings().weight.detach(),
                "evil": Path("/")}, tmp_path / "pytorch_model.bin")
    with pytest.raises(TargetPartsError, match="weights_only=True"):
        TargetParts(tmp_path)


def test_load_drafter_from_target_path_without_tokenizer(tmp_path):
    """load_drafter(target=PATH) on a tokenizer-less target gives the same drafter as
    load_drafter(target=model): same logits."""
    drafter = tiny_drafter()
    target = target_for(drafter)
    target.save_pretrained(tmp_path / "target", max_shard_size="20KB")
    _no_tokenizer(tmp_path / "target")
    save_drafter(drafter, tmp_path / "d", "eagle")          # format A: no embed_tokens stored
    from_path = load_drafter(tmp_path / "d", target=tmp_path / "target")
    from_model = load_drafter(tmp_path / "d", target=target)
    ids, feats = tiny_features(drafter)
    with torch.no_grad():
        assert torch.equal(from_path(ids, feats)[0], from_model(ids, feats)[0])
        assert torch.allclose(from_path(ids, feats)[0], drafter(ids, feats)[0], atol=1e-6)


def test_load_drafter_target_mismatch_names_the_target(tmp_path):
    """A target whose hidden size differs from the drafter's: a CheckpointError naming both widths."""
    drafter = tiny_drafter()
    save_drafter(drafter, tmp_path / "d", "eagle")
    tiny_llama(num_layers=8, hidden=48).save_pretrained(tmp_path / "t")
    with pytest.raises(CheckpointError, match="target hidden_size 48"):
        load_drafter(tmp_path / "d", target=tmp_path / "t")


# -- peak memory does not grow with the target ------------------------------------------------------
def write_sparse_safetensors(path: Path, tensors: dict, big: dict) -> None:
    """A safetensors file with real `tensors` followed by `big` {name: (dtype_str, shape)} entries
    whose bytes are a sparse hole (no disk, no memory until read)."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2}
    header, offset, blobs = {}, 0, []
    for k, t in tensors.items():
        b = t.contiguous().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    for k, (dt, shape) in big.items():
        n = sizes[dt] * int(torch.tensor(shape).prod())
        header[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
        f.truncate(8 + len(h) + offset)


def sparse_target(out: Path, big_gb: float) -> Path:
    """The shipped target's config nested as a multimodal text_config, its embedding and head in
    shard 1 and a `big_gb` GB unused tensor (a sparse hole) in shard 2."""
    from safetensors.torch import load_file
    out.mkdir(parents=True)
    text = json.loads((CODE_TARGET / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({"model_type": "kimi_like", "architectures": ["X"],
                                                 "text_config": text, "vision_config": {"hidden_size": 8}}))
    sd = load_file(str(CODE_TARGET / "model.safetensors"))
    one = {"language_model.model.embed_tokens.weight": sd["model.embed_tokens.weight"],
           "language_model.lm_head.weight": sd["lm_head.weight"]}
    n = int(big_gb * 2**30 / 2 / 7168)
    write_sparse_safetensors(out / "model-00001-of-00002.safetensors", one, {})
    write_sparse_safetensors(out / "model-00002-of-00002.safetensors", {},
                             {"language_model.model.layers.0.mlp.experts.weight": ("BF16", [n, 7168])})
    wm = {k: "model-00001-of-00002.safetensors" for k in one}
    wm["language_model.model.layers.0.mlp.experts.weight"] = "model-00002-of-00002.safetensors"
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return out


def test_peak_rss_does_not_grow_with_target_size(tmp_path):
    """`eagle-nb inspect DRAFTER --target T` and `eagle-nb convert ... --target T` (which takes the
    embedding from T): peak RSS with a 4 GiB target is within 32 MiB of that with a 0.05 GiB target."""
    small = sparse_target(tmp_path / "small", 0.05)
    big = sparse_target(tmp_path / "big", 4.0)
    size = sum(f.stat().st_size for f in big.iterdir())
    assert size > 4 * 2**30
    _no_tokenizer(big)
    for cmd in (["inspect", str(CODE_DRAFTER), "--json", "--target"],
                ["convert", str(CODE_DRAFTER), None, "--to", "speculators", "--target"]):
        rss = {}
        for name, t in (("small", small), ("big", big)):
            argv = [str(tmp_path / f"out_{name}") if a is None else a for a in cmd] + [str(t)]
            rss[name] = peak_rss_mb(*argv)
        print(f"{cmd[0]}: peak RSS {rss['small']:.0f} MiB (0.05 GiB target), "
              f"{rss['big']:.0f} MiB ({size / 2**30:.1f} GiB target)")
        assert rss["big"] - rss["small"] < 32, rss
    out = load_drafter(tmp_path / "out_big")      # the converted drafter carries the target embedding
    from safetensors.torch import load_file
    emb = load_file(str(CODE_TARGET / "model.safetensors"))["model.embed_tokens.weight"]
    assert torch.equal(out.embed_tokens.weight, emb.half().float())   # the drafter is stored in fp16


def test_mtp_layer_embedding_is_not_taken(tmp_path):
    """A DeepSeek-V3-style checkpoint also stores its MTP layer's embedding
    (`model.layers.61.embed_tokens.weight`, same shape): the decoder's own, outermost one is read."""
    model = tiny_llama(num_layers=2)
    model.save_pretrained(tmp_path)
    sd = dict(model.state_dict())
    sd["model.layers.61.embed_tokens.weight"] = torch.zeros_like(sd["model.embed_tokens.weight"])
    sd["model.layers.61.shared_head.head.weight"] = torch.zeros_like(sd["lm_head.weight"])
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "model.safetensors"))
    parts = TargetParts(tmp_path)
    assert parts.embed_key() == "model.embed_tokens.weight" and parts.head_key() == "lm_head.weight"
    assert torch.equal(parts.embed_tokens(), model.get_input_embeddings().weight)
