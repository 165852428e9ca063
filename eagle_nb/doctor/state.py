"""The doctor's one small state: what was asked, then what each phase of the corridor (run.py)
adds to it, in order: observe -> static -> workload -> measure (or signatures) -> rank -> verdict.

A phase reads the fields of the phases before it and fills its own; nothing else is passed
between phases. `WORKLOAD` says what the doctor measures on by default. Knows no phase.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# What the doctor measures on. Greedy chains come from the one pass (onepass_runs.py), cheap enough
# for every shipped prompt x 64 tokens, where a drafter with layer ids shifted by one is named by the
# probe (+0.16 +- 0.04 on the shipped pair; 8 x 32 gave +0.10 +- 0.08). T > 0: live loop, 8 x 32.
WORKLOAD = {"one-pass": (None, 64), "live loop": (8, 32)}     # (prompts, new tokens); None: all


def workload(temperature: float, n_prompts: int | None, max_new_tokens: int | None) -> tuple:
    n, new = WORKLOAD["one-pass" if temperature == 0 else "live loop"]
    return (n if n_prompts is None else n_prompts), (new if max_new_tokens is None else max_new_tokens)


@dataclass
class State:
    """What was asked (the doctor's arguments, documented at `run.doctor`), then each phase's part."""
    drafter: object
    target: object = None
    depth: int | None = None
    prompts: object = None
    n_prompts: int | None = None
    max_new_tokens: int | None = None
    temperature: float = 0.0
    observed_log: object = None         # a path, or several (the same pair at other batch sizes)
    observed_url: str | None = None
    observed_tau: float | None = None
    observed_per_position: object = None
    dynamic: bool = True
    faults: object = None
    conditions: tuple = ()              # serving conditions measured and ranked beside the faults
    pair: object = None
    progress: bool = True
    features: object = None
    trust_remote_code: bool = False
    train_log: object = None
    train_acc: object = None
    # -- observe: the observation, the depth, the plan ---------------------------------------------
    target_path: object = None
    obs: object = None                  # engines.observation.Observation or None
    observations: list = field(default_factory=list)   # every one, when several logs were given
    k: int = 4                          # the depth every prediction is made at
    train: object = None                # what training reported (io.train_logs.TrainAccuracy) or None
    pre: object = None                  # preflight.Preflight of the target (None: a loaded pair)
    recorded: bool = False              # `features` is a greedy recording, measured instead of the target
    inputs: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    # -- static: the checks of the files ----------------------------------------------------------
    checks: list = field(default_factory=list)
    fmt: str | None = None              # the drafter's checkpoint format (checkpoints.registry)
    rep: object = None                  # checkpoints.validate.Report of a drafter directory
    state: dict = field(default_factory=dict)   # its renamed tensors (streamed)
    unreadable: str | None = None       # why the drafter cannot be read at all
    measurable: bool = True             # the format can run in the reference loop
    # -- workload (a prompt file given): the user's requests, as sent -----------------------------------
    workload: object = None             # conditions.workload_summary.Workload, or None
    workload_keep: list = field(default_factory=list)   # its sampled requests that are measured
    # -- measure (the target or a recording runs) or signatures (it cannot) -------------------------
    profiles: dict = field(default_factory=dict)   # name -> ranking.Profile, or the signature's prediction
    probes: list = field(default_factory=list)
    distances: dict = field(default_factory=dict)  # signatures: name -> distance of the observation
    basis: str = "observation"          # what the ranking compares against ('signature', 'recording')
    basis_note: str = ""                # the signature basis in words
    shares: list = field(default_factory=list)     # signatures: the observation's share of healthy
    facts: object = None                # experiment.fault_entry.Facts of the files (signatures)
    serving: list = field(default_factory=list)    # signatures: serving-path faults these files can have
    served: list = field(default_factory=list)     # workload: [(conditions, tau or None, why not)], cumulative
    # -- rank --------------------------------------------------------------------------------------
    hypotheses: list = field(default_factory=list)  # diagnosis.Hypothesis, best first

    def __post_init__(self):
        self.n_prompts, self.max_new_tokens = workload(self.temperature, self.n_prompts, self.max_new_tokens)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def rankable(self) -> bool:
        """An observation with a tau (not a crash-only log) to rank hypotheses against."""
        return self.obs is not None and self.obs.tau == self.obs.tau
