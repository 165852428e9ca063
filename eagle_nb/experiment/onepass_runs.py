"""`Pair.run`'s path for greedy chains: one target pass per (target, prompts), one drafter pass
per wiring, every depth from a walk (loop/onepass.py).

The target pass (loop/target_states.py) decodes the prompts greedily for max_new_tokens + K_MAX
tokens and keeps every layer's states and the final state, so every fault that changes only the
drafter side, the captured layer ids or the handed-over state reads the same pass, and so does
the multimodal wrapper built around the target's weights (`targets.text_twin`: its trajectory and
states are the plain model's bit for bit; which state the engine's capture hands over is still
decided on the wrapper); a fault that changes the prompt text (a chat template) gets its own.
The drafter pass computes match lengths up to K_MAX (or the setting's depth if deeper), so a
sweep over depths 1..8 costs one drafter pass per wiring. Prompts are encoded, fitted and checked
exactly as the live loop does them, and the wiring is the pair's (`Pair.wiring`), so errors read
the same. Results say `computed_by="one-pass"`, carry no timings, and note any draft decision
whose top-2 margin was under `onepass.NEAR_TIE` (where batched numerics could differ).

Knows the pair's attributes (target, tokenizer, wiring, encode); nothing about plotting.
"""
from __future__ import annotations

import contextlib

from eagle_nb.experiment.results import RunResult
from eagle_nb.experiment.setting import Setting
from eagle_nb.loop import onepass as OP
from eagle_nb.loop import onepass_sampled as OS
from eagle_nb.loop import verify_rules as VR
from eagle_nb.loop.chain import SpecStats
from eagle_nb.loop import target_states as TS
from eagle_nb.model.limits import context_length, fit_prompt
from eagle_nb.model.targets import text_twin

K_MAX = 8        # depths computed together by default (the kit's sweeps go to 8)


class OnePass:
    """Caches of one pair: target passes by (target object, prompt ids), drafter passes by
    (prompts, faults, layer override, new tokens)."""

    def __init__(self, pair, batch_size: int = 16):
        self.pair, self.batch_size = pair, batch_size
        self.k_max = K_MAX             # depths computed together (a deeper setting computes more)
        self._states: dict = {}
        self._matches: dict = {}
        self._encoded: dict = {}

    def encode(self, text, template: str | None = None):
        if (text, template) not in self._encoded:
            self._encoded[text, template] = self.pair.encode(text, template)
        return self._encoded[text, template]

    def applies(self, s: Setting, check_reference: bool) -> bool:
        """Greedy chains; chains at T > 0 too when the pair asks for expected values
        (`sampled_one_pass`: metrics in expectation, no per-step traces)."""
        if s.is_tree or check_reference:
            return False
        return s.temperature == 0 or bool(getattr(self.pair, "sampled_one_pass", False))

    def states(self, target, ids: list, n_tokens: int) -> TS.TargetStates:
        """The target's greedy continuations (>= n_tokens) and states for these prompt ids."""
        target = text_twin(target)
        key = (id(target), tuple(tuple(x.reshape(-1).tolist()) for x in ids))
        st = self._states.get(key)
        if st is None or min(x.numel() - T0 for x, T0 in zip(st.ids, st.prompt_lens)) < n_tokens:
            st = TS.from_target(target, ids, n_tokens, batch_size=self.batch_size)
            self._states[key] = st
        return st

    def depth_max(self, ids: list, s: Setting) -> int:
        ctx = context_length(self.pair.target)
        k = max(self.k_max, s.depth)
        if ctx is not None and any(x.shape[-1] + s.max_new_tokens + k > ctx for x in ids):
            k = s.depth                       # fit_prompt checked that the setting's depth fits
        return k

    @contextlib.contextmanager
    def depths_up_to(self, k: int):
        """Compute only depths 1..k in this block (a caller that needs one depth, e.g. the
        doctor); results are the same, a deeper request later recomputes."""
        old, self.k_max = self.k_max, k
        try:
            yield
        finally:
            self.k_max = old

    def prompt_ids(self, prompts: tuple, w, s: Setting, truncate_prompt: bool) -> list:
        """Each prompt's ids as the live loop feeds them (wrapped, encoded, fitted)."""
        return [fit_prompt(self.encode(w.served(p), w.template), self.pair.target,
                           s.max_new_tokens, s.depth, truncate=truncate_prompt, where=f"prompt {i}")
                for i, p in enumerate(prompts)]

    def budgets(self, ids: list, s: Setting):
        """New tokens per prompt: the setting's (a recording of trainers' files: what each holds)."""
        return s.max_new_tokens

    def chain(self, prompts: tuple, s: Setting, truncate_prompt: bool = False):
        """(wiring, target states, drafter pass, ChainRun) for a greedy chain setting."""
        pair = self.pair
        w = pair.wiring(s)
        ids = self.prompt_ids(prompts, w, s, truncate_prompt)
        n = self.budgets(ids, s)
        key = (tuple(prompts), tuple(x.shape[-1] for x in ids), s.faults, s.conditions, s.layer_ids,
               s.max_new_tokens)
        matches, st = self._matches.get(key, (None, None))
        if matches is None or matches.k_max < s.depth:
            k = self.depth_max(ids, s)
            st = self.states(w.target, ids, (max(n) if isinstance(n, list) else n) + k)
            matches = OP.match_lengths(w.drafter, st.ids, st.features(w.features, w.layer_ids),
                                       st.prompt_lens, n, k, fc_policy=w.fc_policy,
                                       d2t=w.d2t, batch_size=self.batch_size, known=st.known)
            self._matches[key] = matches, st
        chain = OP.chain_run(matches, st.ids, st.prompt_lens, s.depth, n, pair.eos_token_id, st.known)
        return w, st, matches, chain

    def run_sampled(self, prompts: tuple, s: Setting, truncate_prompt: bool = False) -> RunResult:
        """A chain at T > 0 in expectation (loop/onepass_sampled.py): the target samples one
        trajectory per prompt with the setting's seed, the drafter's acceptance along it under
        the setting's verify rule is integrated out. Outputs are the trajectories."""
        pair, rule = self.pair, s.verify_rule or VR.DEFAULT_RULE
        w = pair.wiring(s)
        ids = self.prompt_ids(prompts, w, s, truncate_prompt)
        n, k = s.max_new_tokens, max(self.depth_max(ids, s), s.depth)
        target = text_twin(w.target)
        key = ("sampled", id(target), tuple(tuple(x.reshape(-1).tolist()) for x in ids), s.temperature, s.seed)
        st = self._states.get(key)
        if st is None or min(x.numel() - T0 for x, T0 in zip(st.ids, st.prompt_lens)) < n + k:
            st = self._states[key] = TS.from_target(target, ids, n + k, batch_size=self.batch_size,
                                                    temperature=s.temperature, seed=s.seed)
        pe = None
        if rule == VR.SAMPLED:
            head = target.get_output_embeddings()
            pe = [OS.target_probs(head, f, x, T0, s.temperature)
                  for f, x, T0 in zip(st.states[TS.FINAL], st.ids, st.prompt_lens)]
        probs = OS.accept_probabilities(w.drafter, st.ids, st.features(w.features, w.layer_ids), st.prompt_lens,
                                        n, s.depth, s.temperature, rule, pe, fc_policy=w.fc_policy,
                                        d2t=w.d2t, batch_size=self.batch_size)
        run = OS.sampled_chain_run(probs, st.ids, st.prompt_lens, s.depth, n, pair.eos_token_id)
        stats = []
        for x, T0 in zip(st.ids, st.prompt_lens):
            toks = x[T0:T0 + n].tolist()
            if pair.eos_token_id in toks:
                toks = toks[:toks.index(pair.eos_token_id) + 1]
            stats.append(SpecStats(s.depth, s.temperature, T0, tokens=toks))
        notes = [*w.notes, f"computed by one pass at T = {s.temperature:g} in expectation ({rule} rule): "
                 f"acceptance integrated along one trajectory per prompt sampled with seed {s.seed}; "
                 f"no per-step traces"]
        wiring = {**w.describe(), "target": pair.target_path or "shipped", "drafter": pair.drafter_path}
        return RunResult(s, list(prompts), [pair.decode(x.tokens) for x in stats], stats, run.metrics,
                         wiring, None, None, notes, computed_by=OS.COMPUTED_BY)

    def run(self, prompts: tuple, s: Setting, truncate_prompt: bool = False) -> RunResult:
        pair = self.pair
        if s.temperature > 0:
            return self.run_sampled(prompts, s, truncate_prompt)
        w, st, matches, chain = self.chain(prompts, s, truncate_prompt)
        notes = [*w.notes, (f"computed by one pass: {matches.k_max} drafter steps over every "
                            f"position of {len(prompts)} prompts ({matches.seconds:.2f}s)")]
        if chain.censored:
            notes.append(f"{chain.censored} verify steps at the records' ends drafted past the recorded "
                         f"tokens with every recorded draft accepted: counted with the recorded part "
                         f"only (an engine counts them against tokens it generated past max_tokens "
                         f"and discarded), so tau is a lower bound by at most "
                         f"{chain.censored * s.depth / max(chain.metrics.verify_steps, 1):.3f}")
        ties = chain.near_ties
        if ties:
            notes.append(f"{len(ties)} draft decisions had a top-2 margin under {OP.NEAR_TIE:g} "
                         f"(first: prompt {ties[0][0]}, position {ties[0][1]}, step {ties[0][2]}); "
                         "the live loop could decide them differently")
        flips = [(b, d) for b, ds in enumerate(st.target_disagree) for d in ds]
        if flips:
            notes.append(f"the target's batched forward and its greedy decoding disagree at "
                         f"{len(flips)} positions (near-ties; first: prompt {flips[0][0]}, "
                         f"continuation index {flips[0][1]})")
        wiring = {**w.describe(), "target": pair.target_path or "shipped", "drafter": pair.drafter_path}
        outputs = [pair.decode(x.tokens) for x in chain.stats]
        return RunResult(s, list(prompts), outputs, chain.stats, chain.metrics, wiring, None, None,
                         notes, computed_by=OP.COMPUTED_BY)
