"""A drafter and a recording of its target: `RecordedPair`, the `Pair` of a target that is not
loaded (too big for this machine, or running in an engine elsewhere).

Greedy chain acceptance needs from the target only its greedy continuation and its states at the
fed positions (loop/onepass.py says why), and a recording (`eagle-nb record`, loop/recording.py)
holds exactly that. So `run` / `sweep` answer every greedy chain setting from the recording by the
one pass, with the numbers a loaded target would give (tests/experiment/test_recorded_pair.py checks
equality on the shipped pair). The target's directory, when given, supplies what is small and read
lazily (io/target_parts.py): tokenizer, config, the embedding rows a drafter without its own
`embed_tokens` borrows, the embedding `embed-target-forced` swaps in.

What a recording cannot answer raises `NeedsTarget` naming why: sampling (T > 0) and trees (they
need the target's distributions and the wrong branches' scores), the multimodal wrapper (a new
target object) and a chat template (new prompt text). Faults that read other layers (layer ids
shifted, the heuristic ids) need a recording that kept them (`eagle-nb record --layers all`);
`fc-bypass` needs the final state (`--final-hidden`). Prompts are found by their token ids
(encoded as the live loop encodes them) or by record name.

Knows the pair's interface and the recording reader; nothing about plotting.
"""
from __future__ import annotations

from pathlib import Path

import torch

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.onepass_runs import OnePass
from eagle_nb.experiment.pair import Pair
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import SHIPPED_DRAFTER, SHIPPED_DRAFTER_SPECULATORS, SHIPPED_TARGET
from eagle_nb.loop import target_states as TS
from eagle_nb.loop.records import RecordingError
from eagle_nb.model.layers import eagle3_layers

NeedsTarget = F.NeedsTarget


class RecordedOnePass(OnePass):
    """The one pass with the target states read from the recording instead of computed."""

    def prompt_ids(self, prompts: tuple, w, s: Setting, truncate_prompt: bool) -> list:
        pair = self.pair
        if w.prompt_format != "{prompt}":
            raise NeedsTarget(f"the prompts are wrapped as {w.prompt_format!r}: a recording holds the "
                              "target's continuation of the recorded prompt text only")
        if truncate_prompt:
            raise NeedsTarget("truncate_prompt: a recording holds whole prompts only")
        recs = [pair.record_of(p, i) for i, p in enumerate(prompts)]
        return [r.input_ids[:r.prompt_len] for r in recs]

    def depth_max(self, ids: list, s: Setting) -> int:
        recs = [self.pair.record_by_ids(x) for x in ids]
        room = min(r.input_ids.numel() - r.prompt_len for r in recs) - s.max_new_tokens
        if room < s.depth:
            short = min(recs, key=lambda r: r.input_ids.numel() - r.prompt_len)
            raise RecordingError(
                f"{self.pair.recording.path}: record {short.name} holds "
                f"{short.input_ids.numel() - short.prompt_len} tokens after its prompt; "
                f"max_new_tokens={s.max_new_tokens} at depth {s.depth} needs {s.max_new_tokens + s.depth} "
                "(record with a larger --max-new-tokens or --lookahead)")
        return min(max(self.k_max, s.depth), room)

    def states(self, target, ids: list, n_tokens: int) -> TS.TargetStates:
        return TS.from_recording(self.pair.recording, [self.pair.record_by_ids(x) for x in ids])


class RecordedPair(Pair):
    """A drafter and a recording of its target (see the module docstring). Greedy chains only."""

    temperatures = (0.0,)
    trees = False

    def __init__(self, recording, drafter=None, target=None, *, device=None, dtype=None,
                 speculators_path=None):
        from eagle_nb.checkpoints.load import load_drafter
        from eagle_nb.loop.recording import Recording
        from eagle_nb.model.targets import pick_device, resolve_target
        self.recording = recording if isinstance(recording, Recording) else Recording(recording)
        if self.recording.teacher_forced:
            raise RecordingError(f"{self.recording.path}: teacher-forced training files (dataset text, "
                                 "not the target's greedy continuation) give estimates; use "
                                 "`eagle-nb speculate --features` for them")
        shipped = drafter is None
        target = target if target is not None else (SHIPPED_TARGET if shipped else None)
        self.target = None                               # never loaded
        self.target_path = str(resolve_target(target)) if target is not None else None
        self.device = torch.device(pick_device(device))
        self.tokenizer = self._tokenizer()
        self.drafter_path = str(drafter or SHIPPED_DRAFTER)
        cpu = self.device.type == "cpu"   # CPU: float32 arithmetic; an accelerator keeps the file's dtype
        self.drafter = load_drafter(self.drafter_path, self.target_path, device=self.device,
                                    dtype=dtype or (torch.float32 if cpu else None))
        self.speculators_path = speculators_path or (SHIPPED_DRAFTER_SPECULATORS if shipped else None)
        meta = self.recording.meta
        self.num_layers = meta.get("num_layers")
        self.layer_ids = self.drafter.config.aux_layer_ids or list(eagle3_layers(self.num_layers))
        self.builds = F.Builds(self.target_path, self.drafter, self.speculators_path, self.num_layers)
        self._cache: dict = {}
        self.use_one_pass = True
        self.one_pass = RecordedOnePass(self)
        self.records = {r.name: r for r in self.recording}
        self._by_ids = {tuple(r.input_ids[:r.prompt_len].tolist()): r for r in self.records.values()}

    def _tokenizer(self):
        if self.target_path is None or not any(
                (Path(self.target_path) / f).exists() for f in ("tokenizer.json", "tokenizer.model",
                                                                "tokenizer_config.json")):
            return None
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(self.target_path, local_files_only=True)

    def __repr__(self) -> str:
        return (f"RecordedPair({self.recording.path}, {len(self.records)} records, drafter "
                f"{self.drafter_path}, target files {self.target_path or 'none'})")

    def describe(self) -> str:
        meta = self.recording.meta
        kept = meta.get("layer_ids_hf")
        kept = "every layer" if kept == list(range((self.num_layers or 0) + 1)) else f"HF ids {kept}"
        return (f"target: recording {self.recording.path} ({len(self.records)} records of "
                f"{meta.get('target') or 'a target'}, {self.num_layers} layers, {kept} kept, final state "
                f"{'kept' if meta.get('final_hidden') else 'not kept'}; greedy chains only, the target "
                f"is not loaded; its files: {self.target_path or 'none'}); drafter {self.drafter_path} "
                f"on {self.device}; captured HF layer ids {list(self.layer_ids)}")

    def why_not(self, s: Setting) -> str | None:
        """Why the recording cannot answer `s`, or None when it can (decided without running)."""
        if not self.one_pass.applies(s, False):
            return "sampling and trees need the loaded target"
        try:
            w = self.wiring(s)
        except (NeedsTarget, F.NotApplicable) as e:
            return str(e)
        if w.target is not None or w.prompt_format != "{prompt}":
            return "it changes the target or the prompt text"
        meta = self.recording.meta
        if w.features == TS.FEATURES_FINAL:
            return None if meta.get("final_hidden") else "the final state was not recorded"
        kept = set(self.recording.layer_ids or [])
        return None if set(w.layer_ids) <= kept else f"HF ids {sorted(w.layer_ids)} not all kept"

    def answers(self, fault: str) -> bool:
        return self.why_not(Setting(faults=(fault,))) is None

    @property
    def eos_token_id(self):
        return self.recording.meta.get("eos_token_id")

    @property
    def hidden_size(self) -> int:
        return int(self.recording.meta["hidden_size"])

    def decode(self, tokens) -> str:
        return self.tokenizer.decode(tokens) if self.tokenizer is not None else " ".join(map(str, tokens))

    def encode(self, prompt: str) -> torch.Tensor:
        if self.tokenizer is None:
            raise NeedsTarget(f"{self.recording.path}: no tokenizer (give the target's directory with its "
                              f"tokenizer files) to find prompt {prompt[:40]!r}; or name records: "
                              f"{list(self.records)[:3]}...")
        return super().encode(prompt).cpu()

    def prompts(self, n: int | None = None, path=None) -> list[str]:
        """The prompts of a JSON-lines file (found in the recording by their ids), else the
        recording's own records in order, by their prompt text when the recording stored it."""
        if path is not None:
            return super().prompts(n, path)
        recs = list(self.records.values())[:n] if n else list(self.records.values())
        texts = {r["name"]: r.get("prompt") for r in self.recording.meta.get("records", [])}
        return [texts.get(r.name) or r.name for r in recs]

    def record_by_ids(self, ids: torch.Tensor):
        return self._by_ids[tuple(ids.reshape(-1).tolist())]

    def record_of(self, prompt: str, i: int = 0):
        """The record of a prompt: its name, or its text encoded as the live loop encodes it."""
        if prompt in self.records:
            return self.records[prompt]
        rec = self._by_ids.get(tuple(self.encode(prompt).reshape(-1).tolist()))
        if rec is None:
            raise RecordingError(f"{self.recording.path}: prompt {i} ({prompt[:60]!r}) was not recorded "
                                 f"({len(self.records)} records); record it: eagle-nb record --prompts FILE "
                                 "--layers all --final-hidden")
        return rec

    def aux_features(self, prompts):
        """Per prompt, the recorded aux states at the written ids (every recorded position)."""
        for i, p in enumerate(prompts):
            st = TS.from_recording(self.recording, [self.record_of(p, i)])
            yield st.features(TS.FEATURES_AUX, self.layer_ids)[0]

    def _run(self, prompts, s: Setting, check_reference: bool, progress: bool,
             truncate_prompt: bool = False):
        if not self.one_pass.applies(s, False):
            raise NeedsTarget(f"{s.label} at T={s.temperature:g}" + (f", topk {s.topk}" if s.is_tree else "")
                              + ": a recording answers greedy chains (T=0, topk 1) only; sampling "
                                "and trees need the loaded target")
        res = self.one_pass.run(prompts, s, truncate_prompt)
        res.wiring["target"] = f"recording {self.recording.path}"
        if check_reference:
            res.notes.append("outputs are the recorded greedy continuation: the target's greedy "
                             "output by construction (no reference decode)")
        return res


def open_pair(target=None, drafter=None, *, recording=None, **kw) -> Pair:
    """The notebooks' one call: a loaded `Pair`, or with `recording` a pair whose target is that
    recording (`RecordedPair`; the target directory then only lends tokenizer, config and
    embedding). `kw`: Pair's keyword arguments (device, dtype, ...)."""
    if recording is None:
        return Pair(target, drafter, **kw)
    dropped = {k: v for k, v in kw.items() if k in ("device_map", "trust_remote_code") and v}
    if dropped:
        raise ValueError(f"{sorted(dropped)} load the target; with a recording it is never loaded")
    kw = {k: v for k, v in kw.items() if k in ("device", "dtype", "speculators_path")}
    return RecordedPair(recording, drafter, target, **kw)
