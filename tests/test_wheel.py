"""The package stands alone: a wheel built from eagle_nb/ and pyproject.toml alone, installed into a
fresh virtual environment outside the checkout, runs the README's first quick-start example
(`eagle_nb.build_seed_case`, then `eagle-nb doctor` on what it wrote) from a directory outside the
repository. So nothing the quick start needs lives in tests/, scripts/ or data/.

Offline and fast: the wheel is built without build isolation, and the fresh environment reaches
the heavy dependencies (torch, transformers, ...) through a `.pth` file naming this environment's
site-packages (a directory of installed packages, not the checkout) instead of reinstalling them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from eagle_nb.io.paths import REPO_ROOT


def run(*cmd, cwd, env=None, ok=(0,)) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=300)
    assert p.returncode in ok, (cmd, p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return p


def test_the_readme_quick_start_runs_from_an_installed_wheel(tmp_path):
    """build wheel -> install into a fresh venv -> `build_seed_case('kimi-k2.5', DIR)` and
    `eagle-nb doctor --drafter DIR/drafter --target DIR/target --observed DIR/sglang.log` from a
    temporary directory: the imported package is the installed one, and the doctor gives the
    README's verdict (cause wrapper-capture, exit status 1); `eagle-nb speculate` without paths names
    `make install` in a clone (the shipped pair is not in the wheel)."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", src)
    shutil.copytree(REPO_ROOT / "eagle_nb", src / "eagle_nb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", tmp_path / "dist", src, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("eagle_nb-*.whl")

    fresh = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", "--without-pip", fresh, cwd=tmp_path)
    py = fresh / "bin" / "python"
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=tmp_path).stdout.strip())
    deps = Path(sysconfig.get_paths()["purelib"])
    assert not (deps / "eagle_nb").exists(), deps       # this environment has an editable install
    (site / "_eagle_nb_test_deps.pth").write_text(f"{deps}\n")   # its own .pth files are not run
    run(sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel,
        cwd=tmp_path)

    work = tmp_path / "elsewhere"
    work.mkdir()
    case = tmp_path / "case"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    out = run(py, "-c", f"import eagle_nb; eagle_nb.build_seed_case('kimi-k2.5', {str(case)!r}); "
                        f"print(eagle_nb.__file__)", cwd=work, env=env).stdout.strip()
    assert Path(out).resolve().is_relative_to(site.resolve()), out
    p = run(fresh / "bin" / "eagle-nb", "doctor", "--drafter", case / "drafter", "--target",
            case / "target", "--observed", case / "sglang.log", cwd=work, env=env, ok=(1,))
    assert p.stdout.startswith("VERDICT: no check of the files fails"), p.stdout[:500]
    assert "cause: wrapper-capture" in p.stdout

    # a command that needs the shipped pair says where it lives instead of failing under site-packages
    p = run(fresh / "bin" / "eagle-nb", "speculate", "--prompt", "def f(", "--max-new-tokens", "4", cwd=work, env=env, ok=(2,))
    assert "installed without its repository checkout" in p.stderr and "make install" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
