"""What one fault is: a `Fault` entry of the registry (faults.py), holding every fact about it.

Four kinds: a `switch` is simulated by the kit's loop (`apply` transforms the `Wiring`); a `crash`
only makes an engine fail (`crash`: the error text and how to recognise it in a log); a `static`
fault is a property of the files that only the doctor's static checks see; a `serving` fault only
an engine has, and the kit measures it by another entry's signature (its `Serving.signature_of`).
Every entry says whether a static check sees it (`static`, required: `NO_STATIC_TRACE` says "none"
explicitly), so a missing fact is an error when the registry is built, never a silent "no". An
entry that can happen on the serving path to files that pass every check says how (`serving`:
when, the story and the serving-side check for the files' `Facts`, its place in the engine's
data flow).

Knows nothing about models: the functions an entry holds live in fault_fns.py, serving.py and
checkpoints/broken.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

SWITCH, CRASH, STATIC, SERVING = "switch", "crash", "static", "serving"
KINDS = (SWITCH, CRASH, STATIC, SERVING)


@dataclass(frozen=True)
class Static:
    """Which of the doctor's static checks name the fault (ids, the deciding one first; empty:
    no static trace), what they look at, and whether a *pass* of the deciding check shows that
    the files cannot have the fault (then the doctor rules it out whatever the acceptance)."""
    checks: tuple[str, ...]
    how: str = ""
    rules_out: bool = False
    note: str = ""             # a remark after the checks' words (e.g. a variant no check sees)
    formats: tuple[str, ...] = ()   # checkpoint formats whose files can have it (empty: any); a
    #                                 pass of the deciding check rules out files of another format

    def rules_out_files(self, checks, fmt: str | None) -> str | None:
        """The id of the passing deciding check that shows these files cannot have the fault
        (`rules_out`, or files of a format the fault cannot happen to), or None."""
        cid = self.check
        if cid is None or not (self.rules_out or (self.formats and fmt not in self.formats)):
            return None
        return cid if any(c.id == cid and c.status == "pass" for c in checks) else None

    @property
    def check(self) -> str | None:
        return self.checks[0] if self.checks else None

    @property
    def text(self) -> str | None:
        """The catalogue's 'static check' cell: 'lm-head, keys (fail)'; None: no static trace."""
        if not self.checks:
            return None
        return (", ".join(self.checks) + (f" ({self.how})" if self.how else "")
                + (f"; {self.note}" if self.note else ""))


NO_STATIC_TRACE = Static(())


@dataclass(frozen=True)
class Probe:
    """The fault switched on as a doctor probe: if it clearly *raises* tau, `finding` is what that
    means and `reveals` the fault the pair has."""
    finding: str
    reveals: str


@dataclass(frozen=True)
class Crash:
    """How the engine fails: its name, a regex matched against each log line, and the error text
    for a pair's shapes (`text(**shapes)`; fault_fns.py)."""
    engine: str
    pattern: str
    text: Callable[..., str] = field(repr=False)


@dataclass(frozen=True)
class Facts:
    """What the files say that decides which serving-path faults can happen to them."""
    arch: object | None         # model.architectures.Architecture of the target, or None
    arch_name: str | None
    wrapper: bool               # the target-layout check warned
    H: int                      # drafter hidden size
    Ht: int                     # width of each captured target state
    n_aux: int
    V: int
    Vd: int
    has_embed: bool             # the drafter ships its own embed_tokens
    engine: str | None = None   # label of the engine that reported the observation ("SGLang"), or None
    needs: tuple[str, ...] = ()  # what every engine needs from a target class (engine registry)


@dataclass(frozen=True)
class Serving:
    """How the fault happens on the serving path to files that pass every check: when it can
    (`applies`), its story and the check to run on the serving side for these `Facts`, a few
    words for the verdict, its place in the engine's data flow (`flow`: the verdict lists serving
    faults in this order), and the catalogue row whose measured signature stands in for it (None:
    its own)."""
    flow: int
    short: str
    applies: Callable[[Facts], bool] = field(repr=False)
    story: Callable[[Facts], str] = field(repr=False)
    check: Callable[[Facts], str] = field(repr=False)
    signature_of: str | None = None


@dataclass(frozen=True)
class Fault:
    name: str
    kind: str                  # switch | crash | static
    story: str                 # what goes wrong, as a user meets it
    reference: str             # where it is documented publicly
    fix: str                   # what the user changes to get rid of it
    static: Static             # what the doctor's static part sees of it (NO_STATIC_TRACE: nothing)
    apply: Callable | None = field(default=None, repr=False)   # switch: (Wiring, Builds) -> Wiring
    changes: str = ""          # switch: the Wiring fields `apply` changes, comma-separated
    severity: int | None = None  # rank when a failing check names it (lower first); None: after all
    probe: Probe | None = None   # the doctor switches it on as a probe
    crash: Crash | None = None   # crash: the engine's error
    serving: Serving | None = None   # how it happens on the serving path to files that pass
    checkpoint: Callable | None = field(default=None, repr=False)  # (src, dst): write it into a copy
    panel: bool = False        # notebook 03's precomputed panel shows it
    toggle: bool = False       # the live panel offers it as a checkbox
    layer_shift: int = 0       # the live panel's layer-id control selects it for this shift

    def __post_init__(self):
        why = []
        if self.kind not in KINDS:
            why.append(f"kind {self.kind!r} is not one of {KINDS}")
        if not (self.story and self.reference and self.fix):
            why.append("story, reference and fix are required")
        if not isinstance(self.static, Static):
            why.append("static must be a Static (NO_STATIC_TRACE when no check sees it)")
        if (self.kind == SWITCH) != (self.apply is not None and bool(self.changes)):
            why.append("a switch (and only a switch) has `apply` and `changes`")
        if (self.kind == CRASH) != (self.crash is not None):
            why.append("a crash (and only a crash) has `crash`")
        if self.kind == SERVING and (self.serving is None or not self.serving.signature_of):
            why.append("a serving fault is measured by another's signature: give Serving.signature_of")
        if (self.panel or self.toggle or self.layer_shift or self.probe) and self.kind != SWITCH:
            why.append("only a switch can be shown, toggled, shifted or probed")
        if why:
            raise ValueError(f"fault {self.name!r}: " + "; ".join(why))
