"""Measure the healthy pair and each named fault on prompts: the one loop behind the doctor's
predictions (run.py) and the catalogue's table (catalogue.py).

For 'healthy' and every name, at each temperature in turn, `Pair.run` (cached per `Setting`) gives
the statistics and `ranking.profile_from_stats` the profile. A fault that raises one of `catch`
(e.g. `NotApplicable`, a `ValueError`) is recorded with its exception and the rest of its
temperatures are skipped; one broken fault never stops the others. Knows nothing about ranking or
rendering.
"""
from __future__ import annotations

from eagle_nb.doctor import ranking
from eagle_nb.experiment.faults import HEALTHY


def measure_profiles(pair, prompts, names, *, depth: int, temperatures, max_new_tokens: int,
                     catch=Exception, raise_for=(HEALTHY,), desc: str = "measuring faults",
                     leave: bool = False, progress: bool = True) -> tuple[dict, dict]:
    """({name: {temperature: Profile}}, {name: exception}) for 'healthy' then each of `names`.
    An error of a name in `raise_for` propagates."""
    from tqdm.auto import tqdm

    from eagle_nb.experiment.setting import Setting
    profiles, errors = {}, {}
    for name in tqdm([HEALTHY, *names], desc=desc, disable=not progress, leave=leave):
        faults = () if name == HEALTHY else (name,)
        profiles[name] = {}
        for T in temperatures:
            try:
                res = pair.run(prompts, Setting(faults=faults, depth=depth, temperature=T,
                                                max_new_tokens=max_new_tokens), progress=False)
            except catch as e:      # noqa: BLE001 - one broken fault must not stop the others
                if name in raise_for:
                    raise
                errors[name] = e
                break
            profiles[name][T] = ranking.profile_from_stats(res.stats)
    return profiles, errors


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of an exception's message (cut to `limit` characters)."""
    return str(e).splitlines()[0][:limit] if str(e) else ""
