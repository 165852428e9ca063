"""`eagle-nb doctor`: which known EAGLE-3 fault explains what the serving engine reported?

A corridor of named phases over one small state (state.py), each phase in its own module and
entered once:
  1. observe (observe.py): what the engine reported (any registered engine's log, its `/metrics`,
     or numbers), what training reported, the depth, whether the target can run here, the plan;
  2. static (static_checks.py): the drafter's files against the target's config, in the way of
     the drafter's checkpoint format; no generation; then, given a prompt file, the workload
     (workload.py): the user's requests as sent, sampled and summarised (template use, context
     lengths against both limits), choosing the conditions the measure phase runs beside the faults;
  3. measure (measure.py), when the target or a greedy recording of it can run: every catalogue
     fault measured by the kit's reference loop, the fc range, the probes, training accuracy;
     or signatures (signatures.py), when it cannot: the catalogue's measured fault signatures
     relative to a healthy pair, and the serving-path faults the files can have;
  4. rank (hypotheses.py): every hypothesis ordered, each saying why it is where it is;
  5. verdict (verdict.py): a recognised engine error, a failing check, a probe, then the ranking.

Never executes checkpoint code (safetensors / weights_only loads only) and needs no GPU. Knows the
order of the phases only.
"""
from __future__ import annotations

from eagle_nb.doctor.diagnosis import Diagnosis
from eagle_nb.doctor.hypotheses import rank
from eagle_nb.doctor.measure import measure
from eagle_nb.doctor.observe import observe
from eagle_nb.doctor.signatures import signatures
from eagle_nb.doctor.state import State
from eagle_nb.doctor.static_checks import static
from eagle_nb.doctor.verdict import verdict
from eagle_nb.doctor.workload import workload


def doctor(drafter, target=None, **asked) -> Diagnosis:
    """Diagnose a drafter (checkpoint directory or GGUF file) against a target (directory; default:
    the shipped target) and, optionally, what the engine reported. Keyword arguments (state.py):
    `observed_log` / `observed_url` / `observed_tau` (+ `observed_per_position`): what the engine
    reported; `depth` (default: the observation's, else 4); `prompts` (strings and Chats, measured
    as given; or a JSON-lines file of the user's requests, read as a workload, workload.py), `n_prompts` /
    `max_new_tokens` (default `state.WORKLOAD`: all shipped prompts x 64 at T = 0; a workload of
    more than `workload_summary.SAMPLE` requests is sampled), `temperature`; `dynamic=False`
    runs the static part only; `faults` limits the measured faults (default: the whole
    registry); `pair` reuses a loaded `Pair` (and its run cache); `conditions` names serving
    conditions (conditions/registry.py) measured and ranked beside the faults (default none; a
    workload adds those its requests point at); `features` a recording of the target (measured
    instead of it when greedy; else the healthy tau for the signatures); `train_log` /
    `train_acc` add the check that the files reproduce training's accuracy;
    `trust_remote_code`; `progress`. A target that cannot run here (preflight.py) is never
    loaded."""
    st = State(drafter, target, **asked)
    observe(st)         # 1. what was reported; what can run here; the plan
    static(st)          # 2. the files
    workload(st)        # 2'. the user's requests, as sent (when prompts were given)
    measure(st)         # 3. the target (or a recording of it) runs ...
    signatures(st)      # 3'. ... or it cannot: the catalogue's signatures
    rank(st)            # 4. every hypothesis, ordered, each with why
    return verdict(st)  # 5. the verdict
