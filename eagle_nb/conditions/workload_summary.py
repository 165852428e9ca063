"""What a user's workload (their requests, as sent) says about the conditions their drafter serves
under, and which of them the doctor measures on their pair (docs/conditions.md, "The doctor reads
the workload").

From the requests alone (`summarize`): how many there are and which were sampled; the form of
each as sent (`FORMS`: a chat, raw text, or raw text already rendered as ChatML with or without
the assistant's generation prefix); the form the pair is measured in as healthy (the request as
the drafter was trained to see it: a chat endpoint's rendering where the target has a template);
the conditions that form makes worth measuring (`CHOICES`: a template A/B of at most one template
condition); with the request lengths, the context they need against the target's and the
drafter's limits (`context_limits.check_context`), and the requests that do not fit the target,
named and left out of the measurement. After the pair has run (`add_run`): the coverage of its
continuations per language (coverage.py) and their loop share (repetition.py).

Pure: rows, lengths and configs in, data out; knows no tokenizer or model (the doctor's workload
phase, doctor/workload.py, encodes the requests and reads the configs).
"""
from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass, field

from eagle_nb.conditions.condition_fns import CONTEXT_SHARE
from eagle_nb.conditions.context_limits import check_context, context_fields
from eagle_nb.conditions.templates import CHATML, CHATML_START, parse_chatml
from eagle_nb.io.prompts import Chat

SAMPLE = 64             # requests measured from a larger workload unless told (doctor --n-prompts)
SEED = 0                # the sample's seed: the same file gives the same sample
FORMS = ("chat", "raw", "rendered", "rendered-no-generation-prompt", "rendered-unparsed")
AS_CHATS = ("chat", "rendered", "rendered-no-generation-prompt")   # forms that are (or parse to) a Chat
# the target tokenizer's template (templates.template_kind); 'unknown': its tokenizer was not read
TEMPLATES = ("chatml", "other", "none", "unknown")

# (form as sent, the target's template) -> the template condition measured beside the healthy form
MISMATCH, NO_PREFIX, RAW = "chat-template-mismatch", "template-no-generation-prompt", "template-raw"
CHOICES = {("chat", "chatml"): RAW, ("chat", "other"): RAW, ("raw", "chatml"): RAW, ("raw", "other"): RAW,
           ("rendered", "chatml"): RAW, ("rendered", "other"): MISMATCH, ("rendered", "none"): MISMATCH,
           ("rendered-no-generation-prompt", "chatml"): NO_PREFIX,
           ("rendered-no-generation-prompt", "other"): MISMATCH, ("rendered-no-generation-prompt", "none"): MISMATCH}
SENT = {"chat": "chat requests", "raw": "raw requests", "rendered": "requests rendered as ChatML",
        "rendered-no-generation-prompt": "requests rendered as ChatML without the assistant's prefix"}
HEALTHY_AS = {"chatml": "in the target's template with its generation prefix",
              "other": "in the target's template with its generation prefix", "none": "as the user's text alone"}
HAS = {"chatml": "a ChatML template", "other": "a chat template (not ChatML)", "none": "no chat template",
       "unknown": "a template not known here (its tokenizer was not read)"}
OFF = {RAW: "with the template off, the user's text alone", MISMATCH: "between ChatML markers",
       NO_PREFIX: "without the generation prefix"}
CONTEXT = "context-past-training"


class MixedWorkloadWarning(UserWarning):
    """A workload holds chat and raw requests together (a file may not: io/prompts.py refuses it)."""


def sample_indices(n_rows: int, n: int | None, seed: int = SEED) -> list[int]:
    """Indices of the requests measured, in file order: all of them when there are at most `n`
    (None: SAMPLE), else a seeded random sample of `n`."""
    n = SAMPLE if n is None else n
    if n < 1:
        raise ValueError(f"the number of requests to measure must be >= 1, got {n}")
    return list(range(n_rows)) if n_rows <= n else sorted(random.Random(seed).sample(range(n_rows), n))


def form_of(prompt) -> str:
    """How a request was sent: one of FORMS."""
    if isinstance(prompt, Chat):
        return "chat"
    if CHATML_START not in prompt:
        return "raw"
    chat, prefix = parse_chatml(prompt)
    return "rendered-unparsed" if chat is None else "rendered" if prefix else "rendered-no-generation-prompt"


def healthy_form(prompt, form: str, template: str):
    """The request as the drafter was trained to see it, which the pair is measured on as healthy:
    a chat (a raw or rendered request taken as one) where the target has a template, the user's text
    alone where it has none; as sent when the template is unknown, for a chat, and for text that
    does not parse."""
    templated = template in ("chatml", "other")
    if form == "raw":
        return Chat.user(prompt) if templated else prompt
    if form in ("rendered", "rendered-no-generation-prompt") and template != "unknown":
        chat = parse_chatml(prompt)[0]
        return chat if templated else chat.text
    return prompt


def sent_under(form: str, template: str) -> str | None:
    """The template condition requests of `form` are sent under to a target with `template` (None:
    sent as the drafter was trained to see them, or no condition applies)."""
    name = CHOICES.get((form, template))
    return None if name is None or form == "chat" or (form, template) == ("rendered", "chatml") else name


@dataclass
class Workload:
    source: str                        # the prompt file
    requests: int                      # requests in the workload
    sampled: int                       # requests read for lengths and measured (before past_target)
    template: str                      # the target tokenizer's template: chatml | other | none
    forms: dict                        # form -> sampled requests sent in it
    system_turns: int                  # sampled chat or rendered requests with a system turn
    conditions: dict                   # condition -> why the workload makes it worth measuring
    new_tokens: int
    lengths: list = field(default_factory=list)       # prompt tokens per sampled request, as sent
    target_limit: int | None = None
    drafter_limit: int | None = None   # the drafter's trained length, else its max_position_embeddings
    context: dict | None = None        # check_context(...).as_dict() over the sampled requests
    past_target: list = field(default_factory=list)   # [(request number, tokens)]: not measured
    warnings: list = field(default_factory=list)
    coverage: dict | None = None       # after add_run: coverage.Coverage.as_dict()
    loops: dict | None = None          # after add_run: repetition.LoopReport.as_dict()
    depth: int = 4
    labels: list = field(default_factory=list, repr=False)   # per sampled request: its language etc.
    measured_lines: list = field(default_factory=list, repr=False)

    @property
    def measured(self) -> int:
        return self.sampled - len(self.past_target)

    def add_run(self, stats, inside, keep, decode=None) -> None:
        """Coverage (per value of the requests' `language`, `category`, `domain` fields) and loop
        share of the healthy run's continuations: `stats` one SpecStats per measured request,
        `keep` their indices among the sampled ones (summarize's), `inside` the draft vocabulary
        mask (workload.drafter_mask)."""
        from eagle_nb.conditions.coverage import coverage
        from eagle_nb.conditions.repetition import loop_report
        labels = [self.labels[i] for i in keep] if self.labels else None
        cov = coverage([s.tokens for s in stats], inside, self.depth, labels)
        loops = loop_report(stats)
        self.coverage, self.loops = cov.as_dict(), loops.as_dict()
        self.measured_lines = (["coverage of the healthy run's continuations:"]
                               + [f"  {ln}" for ln in cov.report_lines(decode)]
                               + ["loop share of the healthy run:"] + [f"  {ln}" for ln in loops.report_lines()])

    def served(self) -> list[str]:
        """The conditions of `conditions` the requests are served under as sent (a template they
        are sent in, the context they need), as against those measured only for comparison."""
        sent = {sent_under(f, self.template) for f, n in self.forms.items() if n}
        return [c for c in self.conditions if c in sent or c == CONTEXT]

    def lines(self) -> list[str]:
        """The report, one line each."""
        how = "all of them" if self.sampled == self.requests else \
            f"a seeded sample of {self.sampled:,}, seed {SEED}; --n-prompts N for another size"
        less = f", less {len(self.past_target)} that do not fit the target" if self.past_target else ""
        out = [f"{self.source}: {self.measured:,} of {self.requests:,} requests "
               f"{'measured' if self.measured_lines else 'taken to measure'} ({how}{less})"]
        forms = ", ".join(f"{n} {f}" for f, n in self.forms.items() if n)
        out.append(f"template use: {forms} ({self.system_turns} with a system turn); the target's tokenizer "
                   f"has {HAS[self.template]}")
        out += [f"to measure beside the faults: {c}: {why}" for c, why in self.conditions.items()]
        if self.lengths:
            ls = sorted(self.lengths)
            out.append(f"context: prompts {ls[0]}-{ls[-1]} tokens (median {ls[len(ls) // 2]}) + {self.new_tokens} "
                       f"new; target limit {self.target_limit}, drafter limit {self.drafter_limit}")
        out += [f"context: {f}" for f in (self.context or {}).get("findings", [])]
        out += [f"not measured, past the target's context: request {i} ({n} tokens; with {self.new_tokens} "
                f"new and {self.depth} draft positions it needs more than {self.target_limit})"
                for i, n in self.past_target]
        return out + self.measured_lines + [f"warning: {w}" for w in self.warnings]

    def as_dict(self) -> dict:
        d = {k: v for k, v in vars(self).items() if k not in ("labels", "measured_lines")}
        return {**d, "measured": self.measured, "lines": self.lines()}


def summarize(prompts, template: str, *, requests: int, source: str, numbers=None, labels=None,
              lengths=None, new_tokens: int = 64, depth: int = 4, target_cfg=None,
              drafter_cfg=None) -> tuple[Workload, list[int], list]:
    """(the Workload, the indices of the sampled `prompts` that fit the target, their healthy
    forms). `prompts`: the sampled requests as sent (Chat or str); `numbers`: their request
    numbers in the workload, from 1 (default: 1, 2, ...); `labels`: their language/category/domain
    fields (dicts, for coverage); `lengths`: their token counts as sent
    (None: not encoded, nothing left out); configs: dicts or objects (context_fields). Chat and
    raw requests together are a named MixedWorkloadWarning."""
    if template not in TEMPLATES:
        raise ValueError(f"template must be one of {TEMPLATES}, got {template!r}")
    forms = [form_of(p) for p in prompts]
    count = Counter(forms)
    w = Workload(source, requests, len(prompts), template, {f: count[f] for f in FORMS}, 0, {}, new_tokens,
                 depth=depth, labels=list(labels or []))
    chats = [p if f == "chat" else parse_chatml(p)[0] for p, f in zip(prompts, forms) if f in AS_CHATS]
    w.system_turns = sum(any(role == "system" for role, _ in c.messages) for c in chats)
    if count["chat"] and len(prompts) > count["chat"]:
        msg = (f"mixed workload: {count['chat']} chat and {len(prompts) - count['chat']} raw requests; a "
               "workload goes through one endpoint (chat or completions): each is measured in its own form")
        warnings.warn(msg, MixedWorkloadWarning, stacklevel=2)
        w.warnings.append(msg)
    if count["chat"] and template == "none":
        w.warnings.append(f"{count['chat']} chat requests, and the target's tokenizer has no chat template "
                          "to render them")
    if count["rendered-unparsed"]:
        w.warnings.append(f"{count['rendered-unparsed']} raw requests hold ChatML markers but are not a whole "
                          "ChatML rendering: measured as sent, no template condition chosen for them")
    for f in FORMS:
        if count[f] and (f, template) in CHOICES:
            name = CHOICES[(f, template)]
            sent = sent_under(f, template) or "healthy"
            w.conditions.setdefault(name, f"{count[f]} {SENT[f]}: measured {HEALTHY_AS[template]} (healthy) "
                                          f"and {OFF[name]} ({name}); as sent: {sent}")
    keep = list(range(len(prompts)))
    if lengths is not None:
        numbers = list(numbers) if numbers is not None else list(range(1, len(prompts) + 1))
        keep = context(w, list(lengths), numbers, depth, target_cfg, drafter_cfg)
    return w, keep, [healthy_form(prompts[i], forms[i], template) for i in keep]


def context(w: Workload, lengths: list, numbers: list, depth: int, target_cfg, drafter_cfg) -> list[int]:
    """Fill the workload's context fields; the indices of the requests that fit the target (prompt,
    new tokens and `depth` speculative positions, as model/limits.py checks)."""
    w.lengths = lengths
    w.target_limit = context_fields(target_cfg)["max_position_embeddings"] if target_cfg is not None else None
    need = [n + w.new_tokens for n in lengths]
    if target_cfg is not None and drafter_cfg is not None:
        chk = check_context(drafter_cfg, target_cfg, workload_lengths=need)
        w.context, w.drafter_limit = chk.as_dict(), chk.drafter_limit
    lim = w.target_limit
    keep = [i for i, n in enumerate(need) if lim is None or n + depth <= lim]
    w.past_target = [(numbers[i], lengths[i]) for i in range(len(lengths)) if i not in set(keep)]
    over = sum(w.drafter_limit is not None and need[i] > w.drafter_limit for i in keep)
    if over:
        w.conditions[CONTEXT] = (f"{over} of {len(keep)} measured requests need more than the drafter's "
                                 f"{w.drafter_limit} positions: the pair measured with prompts filling "
                                 f"{CONTEXT_SHARE:.0%} of the target's context (context-past-training)")
    if not keep:
        raise ValueError(f"none of the {len(lengths)} sampled requests fits the target's context "
                         f"({lim} positions with {w.new_tokens} new tokens): shorten them or lower "
                         "--max-new-tokens")
    return keep


def planted_requests(prompts, template: str) -> tuple[list[dict], str]:
    """(prompt-file rows, the template condition they are served under): `prompts` as a client
    that gets the template wrong sends them, for a target whose tokenizer has `template`: the
    user's text alone where the target has a chat template (a completions endpoint: template-raw),
    rendered between ChatML markers where it has none (chat-template-mismatch). A planted case
    for the doctor's workload phase (notebook 07)."""
    if template not in ("chatml", "other", "none"):
        raise ValueError(f"the target's template must be known (chatml, other or none), got {template!r}")
    form = "raw" if template in ("chatml", "other") else "rendered"
    text = [p.text if isinstance(p, Chat) else p for p in prompts]
    rows = [{"prompt": t if form == "raw" else CHATML.format(text=t)} for t in text]
    return rows, CHOICES[(form, template)]
