"""Regenerate tests/fixtures/peers/: small files written and read by the peers' OWN code.

Each step runs in the peer's environment, with the peer's source tree given on the command line
(nothing of it is copied into this repository). The expected logits each peer computes are stored
beside its files, so tests/checkpoints/test_peers.py compares eagle_nb against the peer without the
peer installed. Run, from the repository root, with $EAGLE_ENV and $SPECFORGE_ENV the environments
each peer runs in (about a minute in all, CPU):

  # 1. the shared tiny target (any environment with transformers; EAGLE's reads safetensors+index)
  $EAGLE_ENV/bin/python scripts/make_peer_fixtures.py target
  # 2. SafeAILab/EAGLE (transformers 4.53, torch): its trainer's save, its loader's logits, and its
  #    loader run on format-A files written by eagle_nb
  $EAGLE_ENV/bin/python scripts/make_peer_fixtures.py eagle --peer /path/to/EAGLE
  # 3. sgl-project/SpecForge (transformers 5.8.1, torch): its draft model, its export_to_sglang
  $SPECFORGE_ENV/bin/python scripts/make_peer_fixtures.py specforge --peer /path/to/SpecForge

What is emulated rather than run, and why: DeepSpeed itself (EAGLE's `save_16bit_model(...,
exclude_frozen_parameters=True)` is `module.state_dict()` minus the parameters with
requires_grad=False, cast to 16 bit: deepspeed/runtime/engine.py `module_state_dict`), because
DeepSpeed's engine does not run on CPU; and the `datasets` import of EAGLE's trainer (never
called: d2t/t2d come through its own `scandata` cache path).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))        # eagle_nb itself, for the files it writes for the peers
OUT = REPO / "tests" / "fixtures" / "peers"
V, VD, H, HT_WIDE, I, HEADS, KV, L, T = 96, 48, 32, 48, 64, 4, 2, 8, 6


def _save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))


def _vocab_map(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    used = torch.randperm(V, generator=g)[:VD].sort().values
    return used - torch.arange(VD), torch.isin(torch.arange(V), used)


def _inputs(width: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, V, (1, T), generator=g),
            "input_ids_step2": torch.randint(0, V, (1, T), generator=g),
            "hidden_states": torch.randn(1, T, 3 * width, generator=g)}


def _perturb_norms(model: torch.nn.Module, seed: int) -> None:
    """RMSNorm weights start at 1; make them random so a norm applied twice or skipped shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad and (name.endswith("norm.weight") or ".fc_norm." in name):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))


# -- 1. target -------------------------------------------------------------------------------------
def make_target(out: Path) -> None:
    """A tiny random Llama (fp16 safetensors + index json, which EAGLE's embedding loader reads)."""
    import transformers as tf
    cfg = tf.LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
                         num_attention_heads=HEADS, num_key_value_heads=KV, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(cfg).half().eval()
    d = out / "target"
    d.mkdir(parents=True, exist_ok=True)
    model.config.torch_dtype = torch.float16
    model.config.to_json_file(str(d / "config.json"))
    state = {k: v for k, v in model.state_dict().items()}
    _save(state, d / "model.safetensors")
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: "model.safetensors" for k in state}}, indent=1))
    print(f"target: {d}")


# -- 2. EAGLE --------------------------------------------------------------------------------------
def _eagle_draft_config(target_hidden_size: int | None = None) -> dict:
    """Shaped like EAGLE's eagle/traineagle3/config.json, shrunk."""
    d = {"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
         "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02, "intermediate_size": I,
         "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": HEADS,
         "num_key_value_heads": KV, "num_hidden_layers": 1, "pad_token_id": 0, "rms_norm_eps": 1e-05,
         "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True,
         "vocab_size": V, "draft_vocab_size": VD}
    if target_hidden_size is not None:
        d["target_hidden_size"] = target_hidden_size
    return d


def _import_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _eagle_load_like_ea_model(peer: Path, draft_dir: Path, target_dir: Path):
    """EAGLE's inference loader as `EaModel.from_pretrained` / `EaModel.__init__` run it
    (eagle/model/ea_model.py): EConfig from the config, Model(config, path=target, load_emb=True),
    drop d2t/t2d when V == Vd, load_state_dict(strict=False). Returns (model fp32, load result)."""
    sys.path.insert(0, str(peer))
    from eagle.model.cnets import Model
    from eagle.model.configs import EConfig
    config = EConfig.from_pretrained(str(draft_dir / "config.json"))
    m = Model(config, total_tokens=60, depth=7, top_k=10, threshold=1.0, path=str(target_dir),
              load_emb=True)
    if config.vocab_size == config.draft_vocab_size:
        del m.d2t, m.t2d
    f = draft_dir / "pytorch_model.bin"
    if f.exists():
        state = torch.load(f, map_location="cpu", weights_only=True)
    else:
        from safetensors.torch import load_file
        state = load_file(str(draft_dir / "model.safetensors"))
    res = m.load_state_dict(state, strict=False)
    return m.float().eval(), {"missing": list(res.missing_keys), "unexpected": list(res.unexpected_keys)}


def _eagle_logits(m, inp: dict) -> dict:
    """Step 1 from the 3-layer features (EAGLE applies fc since the width differs), step 2 from
    the fed-back pre-norm output, as topK_genrate does. Logits = lm_head(norm(out))."""
    with torch.no_grad():
        out1 = m(inp["hidden_states"], inp["input_ids"])
        out2 = m(out1, inp["input_ids_step2"])
        return {"logits_step1": m.lm_head(m.norm(out1)), "logits_step2": m.lm_head(m.norm(out2))}


def make_eagle(out: Path, peer: Path) -> None:
    target_dir = out / "target"
    d = out / "eagle"
    # (a) the trainer's own Model (eagle/traineagle3/cnets.py), with its frozen target
    sys.path.insert(0, str(peer / "eagle" / "traineagle3"))
    import transformers  # noqa: F401  (before the stub: transformers probes `datasets` itself)
    sys.modules.setdefault("datasets", types.SimpleNamespace(load_dataset=None))  # never called
    train = _import_file("eagle_train_cnets", peer / "eagle" / "traineagle3" / "cnets.py")
    train_cfg_mod = _import_file("eagle_train_configs", peer / "eagle" / "traineagle3" / "configs.py")
    save = d / "deepspeed_save"
    save.mkdir(parents=True, exist_ok=True)
    (save / "config.json").write_text(json.dumps(_eagle_draft_config(), indent=2) + "\n")
    config = train_cfg_mod.EConfig.from_pretrained(str(save / "config.json"))
    torch.manual_seed(1)
    model = train.Model(config, None, types.SimpleNamespace(gradient_checkpointing=False),
                        load_emb=True, path=str(target_dir))
    d2t, t2d = _vocab_map(seed=2)
    with tempfile.TemporaryDirectory() as tmp:       # scandata's cache path registers d2t / t2d
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            torch.save({"d2t": d2t, "t2d": t2d}, "cache.pt")
            model.scandata(None, None)
        finally:
            os.chdir(cwd)
    _perturb_norms(model, seed=3)
    # DeepSpeed fp16 engine + save_16bit_model(exclude_frozen_parameters=True), emulated:
    model = model.half()
    sd = model.state_dict()
    for n, p in model.named_parameters():
        if not p.requires_grad and n in sd:
            del sd[n]
    torch.save(sd, save / "pytorch_model.bin")
    extras = sorted(k for k in sd if k.startswith("target_model."))
    # (b) EAGLE's inference loader on that file
    m, res = _eagle_load_like_ea_model(peer, save, target_dir)
    inp = _inputs(H, seed=4)
    _save({**inp, **_eagle_logits(m, inp)}, d / "deepspeed_save_expected.safetensors")
    (d / "deepspeed_save_load.json").write_text(json.dumps(
        {"target_model_extras": extras, "eagle_load_state_dict": res}, indent=1) + "\n")
    print(f"eagle deepspeed save: {len(sd)} keys, {len(extras)} target_model.* extras; EAGLE load {res}")
    make_eagle_reads_eagle_nb(out, peer)


def _eagle_nb_drafter(ht: int, ids, seed: int, embed=None, **flags):
    """A random eagle_nb drafter (H=32, target width `ht`); `embed`: the target's embedding,
    which the engines give a drafter whose file has none."""
    from eagle_nb.model.config import DrafterConfig
    from eagle_nb.model.drafter import Eagle3Drafter
    cfg = DrafterConfig(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV,
                        intermediate_size=I, vocab_size=V, draft_vocab_size=VD, target_hidden_size=ht,
                        rms_norm_eps=1e-5, aux_layer_ids=ids, **flags)
    torch.manual_seed(seed)
    dr = Eagle3Drafter(cfg)
    with torch.no_grad():
        for p in dr.parameters():
            p.normal_(0, 0.2)
        for mod in dr.modules():
            if type(mod).__name__ == "RMSNorm":
                mod.weight.uniform_(0.7, 1.3)
        if embed is not None:
            dr.embed_tokens.weight.copy_(embed)
        d2t, t2d = _vocab_map(seed)
        dr.d2t.copy_(d2t)
        dr.t2d.copy_(t2d)
    return dr.eval()


def make_eagle_reads_eagle_nb(out: Path, peer: Path) -> None:
    """Format-A files written by eagle_nb's save_drafter, read by EAGLE's own loader: same width
    (EAGLE takes the target's embedding) and a wider target (the file carries embed_tokens)."""
    from safetensors.torch import load_file

    from eagle_nb.checkpoints.save import save_drafter
    temb = load_file(str(out / "target" / "model.safetensors"))["model.embed_tokens.weight"].float()
    for name, ht, ids, seed in (("same_width", H, None, 5), ("wide_target", HT_WIDE, [2, 4, 5], 6)):
        dr = _eagle_nb_drafter(ht, ids, seed, temb if ht == H else None)
        path = save_drafter(dr, out / "eagle" / "written_by_eagle_nb" / name, "eagle")
        m, res = _eagle_load_like_ea_model(peer, path, out / "target")
        inp = _inputs(ht, seed=seed + 10)
        logits = _eagle_logits(m, inp)
        with torch.no_grad():
            ours = dr.step(inp["input_ids"], dr.fuse(inp["hidden_states"]))[0]
        _save({**inp, **logits}, path.parent / f"{name}_expected.safetensors")
        print(f"eagle reads eagle_nb {name}: load {res}; "
              f"max |EAGLE - eagle_nb| step 1 = {(logits['logits_step1'] - ours).abs().max():.3g}")
        if ht == H:   # control: the pre-fix writer put target_hidden_size in every format-A config
            import shutil
            old = Path(tempfile.mkdtemp()) / "old"
            shutil.copytree(path, old)
            c = json.loads((old / "config.json").read_text())
            (old / "config.json").write_text(json.dumps({**c, "target_hidden_size": H}))
            m_old, _ = _eagle_load_like_ea_model(peer, old, out / "target")
            diff = (_eagle_logits(m_old, inp)["logits_step1"] - ours).abs().max()
            print(f"  control, config with target_hidden_size={H} (old writer): EAGLE runs a random "
                  f"embedding, max |EAGLE - eagle_nb| step 1 = {diff:.3g}")


# -- 3. SpecForge ----------------------------------------------------------------------------------
def make_specforge(out: Path, peer: Path) -> None:
    """SpecForge's LlamaForCausalLMEagle3 (bf16, as materialize_draft builds it), saved as its
    trainer's training_state.pt and exported by its own export_to_sglang. Two drafts: EAGLE-3 and
    EAGLE-3.1 (fc_norm + norm_output). Expected logits from SpecForge's own modules: step 1 from
    the features, step 2 from the fed-back PRE-norm state, as its training loop feeds it
    (algorithms/eagle3/model.py: `hidden_states = hidden_states_out`), each as one causal pass."""
    sys.path.insert(0, str(peer))
    from specforge.export.to_sglang import export_to_sglang
    from specforge.modeling.auto import AutoDraftModel, AutoDraftModelConfig
    d = out / "specforge"
    for name, flags, seed in (("eagle3", {}, 7), ("eagle31_fc_norm_norm_output",
                                                   {"fc_norm": True, "norm_output": True}, 8)):
        work = Path(tempfile.mkdtemp())
        cfg = {"architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 1, "eos_token_id": 2,
               "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
               "intermediate_size": I, "max_position_embeddings": 2048, "model_type": "llama",
               "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_hidden_layers": 1,
               "pad_token_id": 0, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
               "torch_dtype": "bfloat16", "vocab_size": V, "draft_vocab_size": VD,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4],
                                "use_aux_hidden_state": True}, **flags}
        (work / "draft_config.json").write_text(json.dumps(cfg, indent=2))
        torch.manual_seed(seed)
        model = AutoDraftModel.from_config(AutoDraftModelConfig.from_file(str(work / "draft_config.json")),
                                           torch_dtype=torch.bfloat16)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "embed" not in n:
                    p.normal_(0, 0.2)
            _perturb_norms(model, seed)
            d2t, t2d = _vocab_map(seed)
            model.d2t.copy_(d2t)
            model.t2d.copy_(t2d)
        state = {k: v for k, v in model.state_dict().items() if "embed" not in k.lower()}
        torch.save({"strategy": "eagle3", "draft_state_dict": state}, work / "training_state.pt")
        dst = d / name
        export_to_sglang(str(work / "training_state.pt"), str(work / "draft_config.json"), str(dst))
        # SpecForge's own modules built in fp32 (a bf16 build also rounds its RoPE tables), loaded
        # with the exported file and the target embedding through its own embedding loader
        from safetensors.torch import load_file
        model = AutoDraftModel.from_config(AutoDraftModelConfig.from_file(str(work / "draft_config.json")),
                                           torch_dtype=torch.float32)
        res = model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in
                                     load_file(str(dst / "model.safetensors")).items()}, strict=False)
        assert list(res.unexpected_keys) == [] and list(res.missing_keys) == ["embed_tokens.weight"], res
        model.load_embedding(str(out / "target"))
        model = model.float().eval()
        inp = _inputs(H, seed=seed + 10)
        logits = _specforge_logits(model, inp)
        _save({**inp, **logits}, d / f"{name}_expected.safetensors")
        print(f"specforge {name}: exported {sorted(p.name for p in dst.iterdir())}, "
              f"config dtype fields {[k for k in json.loads((dst / 'config.json').read_text()) if 'dtype' in k]}")
    make_specforge_reads_eagle_nb(out, peer)


def _specforge_logits(model, inp: dict) -> dict:
    """SpecForge's own modules: step 1 from the features, step 2 from the fed-back pre-norm
    state (its training loop), each one causal pass at positions 0..T-1."""
    with torch.no_grad():
        pos = torch.arange(T)[None]
        mask = model.prepare_decoder_attention_mask(torch.ones(1, T, dtype=torch.bool),
                                                    inp["hidden_states"], 1, T, 0)

        def run(ids, g):
            return model.backbone(model.embed_input_ids(ids), g, None, mask, pos, None, False)
        out1 = run(inp["input_ids"], model.project_hidden_states(inp["hidden_states"]))
        out2 = run(inp["input_ids_step2"], out1)
        return {"logits_step1": model.compute_logits(out1),
                "logits_step2_prenorm_fed_back": model.compute_logits(out2)}


def make_specforge_reads_eagle_nb(out: Path, peer: Path) -> None:
    """Format-B files written by eagle_nb's save_drafter (EAGLE-3, and EAGLE-3.1 with fc_norm and
    norm_output), read the way SpecForge reads draft weights: its own `materialize_draft` (from
    the config, strict about unexpected and missing non-embedding keys) accepts the file; logits
    come from the same modules built in fp32, with the target embedding from `load_embedding`.
    NOTE: not AutoDraftModel.from_pretrained: under transformers 5.8.1 it leaves the rotary
    `inv_freq` buffer uninitialised (seen on SpecForge's own export too)."""
    sys.path.insert(0, str(peer))
    from safetensors.torch import load_file
    from specforge.export.checkpoint_io import materialize_draft
    from specforge.modeling.auto import AutoDraftModel, AutoDraftModelConfig

    from eagle_nb.checkpoints.save import save_drafter
    temb = load_file(str(out / "target" / "model.safetensors"))["model.embed_tokens.weight"].float()
    for name, flags, seed in (("eagle3", {}, 9), ("eagle31_fc_norm_norm_output",
                                                   {"fc_norm": True, "norm_output": True}, 10)):
        dr = _eagle_nb_drafter(H, [2, 4, 5], seed, temb, **flags)
        path = save_drafter(dr, out / "specforge" / "written_by_eagle_nb" / name, "sglang")
        state = load_file(str(path / "model.safetensors"))
        materialize_draft({"draft_state_dict": state}, str(path / "config.json"))   # raises if bad
        model = AutoDraftModel.from_config(AutoDraftModelConfig.from_file(str(path / "config.json")),
                                           torch_dtype=torch.float32)
        res = model.load_state_dict(state, strict=False)
        assert list(res.unexpected_keys) == [] and list(res.missing_keys) == ["embed_tokens.weight"], res
        model.load_embedding(str(out / "target"))
        model = model.float().eval()
        inp = _inputs(H, seed=seed + 10)
        logits = _specforge_logits(model, inp)
        with torch.no_grad():
            ours = dr.step(inp["input_ids"], dr.fuse(inp["hidden_states"]))[0]
        _save({**inp, **logits}, path.parent / f"{name}_expected.safetensors")
        print(f"specforge reads eagle_nb {name}: max |SpecForge - eagle_nb| step 1 = "
              f"{(logits['logits_step1'] - ours).abs().max():.3g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["target", "eagle", "specforge"])
    ap.add_argument("--peer", type=Path, help="the peer's source tree (EAGLE or SpecForge checkout)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    if a.step != "target" and a.peer is None:
        ap.error(f"{a.step} needs --peer PATH (the {a.step} source tree)")
    {"target": lambda: make_target(a.out), "eagle": lambda: make_eagle(a.out, a.peer),
     "specforge": lambda: make_specforge(a.out, a.peer)}[a.step]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
