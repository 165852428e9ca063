"""A bad flag is refused before anything heavy loads: every `eagle-nb` command parses and checks its
arguments (commands, options, choices, fault names, --layers spelling, notebook parameters, value
ranges) before torch or transformers are imported, says which known name is closest, and the
top-level --help lists every command on one line.

Each refusal runs in a fresh interpreter, its CPU time measured from the outside (interpreter start
included).
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys

import pytest

from eagle_nb.io.paths import REPO_ROOT

# Prints, even on the SystemExit of a refusal, whether the heavy libraries were imported.
PROBE = ("import sys\nfrom eagle_nb.cli.main import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
         "    print('HEAVY', sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
BUDGET_S = 1.5


def refuse(*argv: str) -> tuple[float, str, str]:
    """(CPU seconds, stderr, what heavy modules were imported) of `eagle-nb ARGV`, which must exit
    2. CPU time of the child, not wall time: the test cores are shared, and a refusal that imports
    torch costs seconds of CPU however busy the machine is (the timeout catches a hang)."""
    env = dict(os.environ, COLUMNS="100")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    return seconds, out.stderr, out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, says", [
    (["speculate", "--prompt", "x", "--ablate", "fc-bypas"],
     "argument --ablate: unknown fault 'fc-bypas'; did you mean 'fc-bypass'?"),
    (["engine", "compare", "--ablate", "layer-ids+2"], "did you mean 'layer-ids+1'?"),
    (["specualte", "--prompt", "x"], "unknown command 'specualte'; did you mean 'speculate'?"),
    (["convert", "a", "b", "--to", "sglan"], "invalid choice: 'sglan'; did you mean 'sglang'?"),
    (["doctor", "--drafter", "d", "--obseved", "x.log"],
     "unrecognized arguments: --obseved x.log; did you mean '--observed'?"),
    (["capture", "--prompt", "x", "--layers", "eagl3"], "did you mean 'eagle3'?"),
    (["report", "--param", "deptth=3"], "did you mean 'depth'?"),
    (["speculate", "--prompt", "x", "--depth", "0"], "depth (--depth) must be in 1..32, got 0"),
], ids=["ablate", "engine-ablate", "command", "choice", "option", "layers", "param", "range"])
def test_a_bad_flag_is_refused_fast_with_the_closest_name(argv, says):
    """The command exits 2 naming the bad value and the closest known one, in under 1.5 CPU s from
    interpreter start, without importing torch or transformers."""
    seconds, err, heavy = refuse(*argv)
    assert says in " ".join(err.split()), err
    assert heavy == "HEAVY []", heavy
    assert seconds < BUDGET_S, f"{argv}: {seconds:.2f} s"


def test_top_level_help_lists_every_command_on_one_line():
    """`eagle-nb --help` (80 columns) has one line per command of `COMMANDS`: its name and its
    one-line help, never wrapped onto a second line."""
    from eagle_nb.cli.main import COMMANDS
    out = subprocess.run([sys.executable, "-m", "eagle_nb", "--help"], capture_output=True, text=True,
                         cwd=REPO_ROOT, env=dict(os.environ, COLUMNS="80"), timeout=60).stdout
    lines = out.splitlines()
    names = [m.__name__.rsplit(".", 1)[1] for m in COMMANDS]
    for name in names:
        at = [i for i, line in enumerate(lines) if re.match(rf"^    {name} +\S", line)]
        assert len(at) == 1, (name, out)
        after = lines[at[0] + 1]
        assert not after.strip() or re.match(rf"^    ({'|'.join(names)}) ", after), (name, after)
