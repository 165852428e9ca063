"""A drafter and a recording of its target: `RecordedPair`, the `Pair` of a target that is not
loaded (too big for this machine, or running in an engine elsewhere), and the one way the kit
computes from a recording (`eagle-nb speculate --features`, the doctor, the notebooks).

Greedy chain acceptance needs from the target only its greedy continuation and its states at the
fed positions (loop/onepass.py says why), and a recording (`eagle-nb record`, recordings/recording.py)
holds exactly that. So `run` / `sweep` answer every greedy chain setting from the recording by the
one pass, with the numbers a loaded target would give (tests/experiment/test_recorded_pair.py checks
equality on the shipped pair, and against the step-by-step reference, recordings/replay.py). Records are
read one at a time and cut to what a setting reads, so memory does not grow with the recording.

Trainers' hidden-state files (SpecForge, speculators: recordings/foreign_features.py) are teacher-forced
on dataset text, not the target's own continuation: each record answers as many new tokens as it
holds, and results are labelled estimates (`RunResult.estimate`), unless the target's lm_head
(from its directory) picks the dataset's token at every position of records that kept the final
state. A recording made with the target in another dtype than the kit's reference loop runs it in
warns (`recordings.recording.DtypeMismatchWarning`) and says so in every result.

The target's directory, when given, supplies what is small and read lazily (io/target_parts.py):
tokenizer, config, the embedding rows a drafter without its own `embed_tokens` borrows, the
embedding `embed-target-forced` swaps in, the lm_head. What a recording cannot answer raises
`NeedsTarget` naming why (recorded_runs.py). Knows the pair's interface and the recording reader.
"""
from __future__ import annotations

from pathlib import Path

import torch

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.pair import Pair
from eagle_nb.experiment.recorded_runs import RecordedOnePass, greedy_agreement
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import shipped_halves
from eagle_nb.loop import target_states as TS
from eagle_nb.recordings.recording import Recording, check_dtype
from eagle_nb.recordings.records import RecordingError
from eagle_nb.model.layers import eagle3_layers

NeedsTarget = F.NeedsTarget
REFERENCE_DTYPE = "float32"     # what the kit's reference loop runs the target in (CPU)



def recorded_prompt(entry: dict):
    """A record's prompt as the index keeps it: raw text, a `Chat` (its `messages`), or None."""
    if entry.get("messages"):
        from eagle_nb.io.prompts import Chat
        return Chat.from_dicts(entry["messages"], f"record {entry.get('name')} messages")
    return entry.get("prompt")

class RecordedPair(Pair):
    """A drafter and a recording of its target (see the module docstring). Greedy chains only."""

    temperatures = (0.0,)
    trees = False

    def __init__(self, recording, drafter=None, target=None, *, device=None, dtype=None,
                 speculators_path=None, check_greedy: bool = True, target_dtype=REFERENCE_DTYPE):
        from eagle_nb.checkpoints.load import load_drafter
        from eagle_nb.model.targets import pick_device, resolve_target
        self.recording = recording if isinstance(recording, Recording) else Recording(recording)
        _, target, drafter, speculators_path = shipped_halves(target, drafter, speculators_path)
        self.target = None                               # never loaded
        self.target_path = str(resolve_target(target)) if target is not None else None
        self.device = torch.device(pick_device(device))
        self.tokenizer = self._tokenizer()
        self.drafter_path = str(drafter)
        cpu = self.device.type == "cpu"   # CPU: float32 arithmetic; an accelerator keeps the file's dtype
        self.drafter = load_drafter(self.drafter_path, self.target_path, device=self.device,
                                    dtype=dtype or (torch.float32 if cpu else None))
        self.speculators_path = speculators_path
        self.num_layers = self.recording.meta.get("num_layers")
        self.notes: list[str] = []
        self.layer_ids = self._layer_ids()
        self.builds = F.Builds(self.target_path, self.drafter, self.speculators_path, self.num_layers)
        self._cache: dict = {}
        self.use_one_pass = True
        self.sampled_one_pass = False      # a recording holds greedy continuations only
        self.one_pass = RecordedOnePass(self)
        self.estimate = self.recording.teacher_forced
        self._index(check_greedy and self.estimate and self.target_path is not None)
        mismatch = check_dtype(self.recording, target_dtype, "the kit's reference loop")
        if mismatch:
            self.notes.append(mismatch)

    def _layer_ids(self) -> list[int]:
        """The drafter's aux ids, which the recording must hold (a recording cannot re-capture)."""
        rec, want = self.recording.layer_ids, self.drafter.config.aux_layer_ids
        if want is None and self.num_layers:
            want = list(eagle3_layers(int(self.num_layers)))
            self.notes.append(f"drafter has no layer ids; EAGLE default {want} for a {self.num_layers}-layer target")
        if rec is None:
            self.notes.append("recording does not state its layer ids; only the width is checked")
            return list(want) if want else list(range(self.drafter.config.num_aux))
        if want is not None and not set(want) <= set(rec):
            raise RecordingError(f"{self.recording.path}: recorded HF layer ids {rec}, but the drafter "
                                 f"reads {sorted(want)}; record again with the drafter's ids")
        return list(want) if want is not None else list(rec)

    def _index(self, check_greedy: bool) -> None:
        """Prompt ids and lengths of every record (ids only where the format allows); for
        teacher-forced records with final states, whether the text is the target's greedy output."""
        head = None
        if check_greedy:
            from eagle_nb.io.target_parts import TargetParts
            head = TargetParts(self.target_path).lm_head()
        self.records, self._by_ids, agree, checked, missing = {}, {}, 0, 0, 0
        for name in self.recording.names:
            if head is None:
                ids, P, T = self.recording.prompt_ids(name)
            else:
                r = self.recording.read(name)
                ids, P, T = r.input_ids[:r.prompt_len], r.prompt_len, r.input_ids.numel()
                a, c = greedy_agreement(r, head) if r.final is not None else (0, 0)
                agree, checked, missing = agree + a, checked + c, missing + (r.final is None)
            self.records[name] = (P, T)
            self._by_ids[tuple(ids.tolist())] = name
        self._by_text = {p: r["name"] for r in self.recording.meta["records"] if (p := recorded_prompt(r))}
        if self.estimate:
            self.notes.append("features are teacher-forced on dataset text: tau is an ESTIMATE")
        if checked:
            self.notes.append(f"dataset text is the target's greedy token at {agree}/{checked} positions "
                              f"({agree / checked:.1%}) of {len(self.records) - missing} records")
            if agree == checked and not missing:
                self.estimate = False
                self.notes.append("so these teacher-forced features are the target's greedy output: tau is exact")

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
        if s.conditions:
            return "serving conditions change what the target is fed or computes: a recording holds one served run"
        try:
            w = self.wiring(s)
        except (NeedsTarget, F.NotApplicable) as e:
            return str(e)
        if w.target is not None or w.prompt_format != "{prompt}" or w.template is not None:
            return "it changes the target or the prompt text"
        if w.features == TS.FEATURES_FINAL:
            return None if self.recording.meta.get("final_hidden") else "the final state was not recorded"
        kept = set(self.recording.layer_ids or self.layer_ids)
        return None if set(w.layer_ids) <= kept else f"HF ids {sorted(w.layer_ids)} not all kept"

    def answers(self, fault: str) -> bool:
        return self.why_not(Setting(faults=(fault,))) is None

    @property
    def eos_token_id(self):
        return self.recording.meta.get("eos_token_id")

    @property
    def hidden_size(self) -> int:
        return int(self.recording.meta.get("hidden_size") or self.drafter.config.target_hidden_size)

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
        names = list(self.records)[:n] if n else list(self.records)
        texts = {r["name"]: recorded_prompt(r) for r in self.recording.meta.get("records", [])}
        return [texts.get(name) or name for name in names]

    def record_by_ids(self, ids: torch.Tensor) -> str:
        return self._by_ids[tuple(ids.reshape(-1).tolist())]

    def record_of(self, prompt: str, i: int = 0) -> str:
        """The record name of a prompt: its name, its text as recorded, or its text encoded as the
        live loop encodes it."""
        if prompt in self.records:
            return prompt
        if self.tokenizer is None and prompt in self._by_text:
            return self._by_text[prompt]
        name = self._by_ids.get(tuple(self.encode(prompt).reshape(-1).tolist()))
        if name is None:
            raise RecordingError(f"{self.recording.path}: prompt {i} ({prompt[:60]!r}) was not recorded "
                                 f"({len(self.records)} records); record it: eagle-nb record --prompts FILE "
                                 "--layers all --final-hidden")
        return name

    def aux_features(self, prompts):
        """Per prompt, the recorded aux states at the written ids (every recorded position)."""
        for i, p in enumerate(prompts):
            st = self.one_pass.read([self.record_of(p, i)])
            yield st.features(TS.FEATURES_AUX, self.layer_ids)[0]

    def _run(self, prompts, s: Setting, check_reference: bool, progress: bool,
             truncate_prompt: bool = False):
        if not self.one_pass.applies(s, False):
            raise NeedsTarget(f"{s.label} at T={s.temperature:g}" + (f", topk {s.topk}" if s.is_tree else "")
                              + ": a recording answers greedy chains (T=0, topk 1) only; sampling "
                                "and trees need the loaded target")
        res = self.one_pass.run(prompts, s, truncate_prompt)
        res.wiring["target"] = f"recording {self.recording.path}"
        res.estimate = self.estimate
        res.notes[:0] = self.notes
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
