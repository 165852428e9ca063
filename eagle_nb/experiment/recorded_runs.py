"""`RecordedPair.run`'s path (recorded_pair.py): the one pass (onepass_runs.py) with the target's
states read from the recording instead of computed.

Records are found by their prompt ids (or names), read one at a time and cut to the tokens and
states a setting reads (`prompt + new tokens + depth`), so memory holds the cut pieces, never the
recording. Our recordings answer `max_new_tokens` new tokens up to their lookahead in depth; a
teacher-forced record (trainers' files) answers as many as it holds. What a recording cannot
answer is refused with the reason. Knows the one pass and the recording reader; nothing about
plotting.
"""
from __future__ import annotations

import torch

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.onepass_runs import OnePass
from eagle_nb.experiment.setting import Setting
from eagle_nb.loop import target_states as TS
from eagle_nb.recordings.records import Record, RecordingError


def greedy_agreement(rec: Record, lm_head: torch.Tensor) -> tuple[int, int]:
    """(positions where the record's next token is the target's argmax, positions checked), from
    the recorded final (post-norm) states and the target's `lm_head` (V, H): tells whether
    teacher-forced text is the target's own greedy output."""
    P, T = rec.prompt_len, min(rec.final.shape[0], rec.input_ids.numel() - 1)
    logits = rec.final[P - 1:T].float() @ lm_head.float().T             # (T-P+1, V)
    return int((logits.argmax(-1) == rec.input_ids[P:T + 1]).sum()), T - P + 1


class RecordedOnePass(OnePass):
    """The one pass with the target states read from the recording instead of computed."""

    def applies(self, s: Setting, check_reference: bool) -> bool:
        return s.temperature == 0 and super().applies(s, check_reference)   # greedy recordings

    def prompt_ids(self, prompts: tuple, w, s: Setting, truncate_prompt: bool) -> list:
        pair = self.pair
        if s.conditions:
            raise F.NeedsTarget(f"serving conditions ({', '.join(s.conditions)}) change what the "
                                "target is fed or computes: a recording holds one served run")
        if w.prompt_format != "{prompt}":
            raise F.NeedsTarget(f"the prompts are wrapped as {w.prompt_format!r}: a recording holds the "
                                "target's continuation of the recorded prompt text only")
        if truncate_prompt:
            raise F.NeedsTarget("truncate_prompt: a recording holds whole prompts only")
        names = [pair.record_of(p, i) for i, p in enumerate(prompts)]
        return [pair.recording.prompt_ids(n)[0] for n in names]

    def _held(self, ids: list) -> list[tuple[str, int, int]]:
        """(name, prompt length, tokens after the prompt) of each prompt's record."""
        out = []
        for x in ids:
            name = self.pair.record_by_ids(x)
            P, T = self.pair.records[name]
            out.append((name, P, T - P))
        return out

    def budgets(self, ids: list, s: Setting):
        if not self.pair.recording.teacher_forced:
            return s.max_new_tokens
        out = []
        for name, _, after in self._held(ids):       # what each teacher-forced record holds
            if after < 1:
                raise RecordingError(f"{self.pair.recording.path}: record {name} has no tokens after its prompt")
            out.append(min(s.max_new_tokens, after))  # to its end, as an engine counts (censored there)
        return out

    def depth_max(self, ids: list, s: Setting) -> int:
        rec = self.pair.recording
        if rec.teacher_forced:           # drafts past a record's end are padded, never hits
            return max(self.k_max, s.depth)
        n = self.budgets(ids, s)
        held = self._held(ids)
        room = min(after - (b if isinstance(n, list) else n) for (_, _, after), b in
                   zip(held, n if isinstance(n, list) else [n] * len(held)))
        if room < s.depth:
            name, _, after = min(held, key=lambda h: h[2])
            look = rec.meta.get("lookahead")
            raise RecordingError(
                f"{rec.path}: record {name} holds {after} tokens after its prompt; "
                f"max_new_tokens={s.max_new_tokens} at depth {s.depth} needs {s.max_new_tokens + s.depth} "
                + (f"(recorded with lookahead {look}: " if look is not None else "(")
                + "record with a larger --max-new-tokens or --lookahead)")
        return min(max(self.k_max, s.depth), room)

    def read(self, names: list[str], n_tokens: int | None = None) -> TS.TargetStates:
        """These records, each cut to its prompt + `n_tokens` (None: whole), one read at a time; a
        teacher-forced record shorter than that is padded (token 0) and `known` says where."""
        rec, recs, known = self.pair.recording, [], []
        for name in names:
            r = rec.read(name)
            if n_tokens is not None:
                end = r.prompt_len + n_tokens
                ids = r.input_ids[:end].clone()
                known.append(ids.numel())
                if ids.numel() < end and rec.teacher_forced:
                    ids = torch.cat([ids, ids.new_zeros(end - ids.numel())])
                r = Record(r.name, ids, r.prompt_len, r.aux[:end - 1].clone(),
                           None if r.final is None else r.final[:end - 1].clone())
            recs.append(r)
        st = TS.from_recording(rec, recs)
        if rec.teacher_forced and n_tokens is not None:
            st.known = known
        if st.fused_ids is None:           # trainers' files: taken to hold the drafter's ids
            st.fused_ids = sorted(self.pair.layer_ids)
        return st

    def states(self, target, ids: list, n_tokens: int) -> TS.TargetStates:
        names = [self.pair.record_by_ids(x) for x in ids]
        key = (tuple(names), n_tokens)
        if key not in self._states:
            self._states[key] = self.read(names, n_tokens)
        return self._states[key]
