"""The README is a front page and docs/ holds the facts the code cites: every `docs/*.md` and
`tests/...py` a file names exists, every relative link resolves, and the generated catalogue page
matches its data."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = {".py", ".md", ".json", ".ipynb", ".toml", ".txt"}


def _files():
    """The repository's own text files: what git tracks or would track (build outputs, the
    environments and generated reports are ignored)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode == 0:
        return [ROOT / f for f in out.stdout.splitlines() if Path(f).suffix in TEXT and (ROOT / f).is_file()]
    return [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in TEXT
            and not ({".git", ".venv", ".venv-engine", "reports"} & set(p.relative_to(ROOT).parts))]


def test_readme_is_a_front_page():
    """README.md stays under 200 lines and names the two commands CI and users run."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "make reports" in text and "make test" in text


def test_every_cited_docs_page_exists():
    """Code, tests, data and docs cite docs pages by name (`docs/layers.md`); each one exists."""
    cited = {m for p in _files() for m in re.findall(r"\bdocs/([a-z_-]+\.md)", p.read_text(errors="ignore"))}
    missing = sorted(c for c in cited if not (ROOT / "docs" / c).is_file())
    assert cited and not missing, missing


def test_every_cited_test_file_exists():
    """Code, tests, data and docs cite tests by path (`tests/loop/test_tree.py`); each one exists,
    so moving a test module means updating what cites it."""
    cited = {m for p in _files()
             for m in re.findall(r"(?<![\w/.-])tests/[\w/]+\.py\b", p.read_text(errors="ignore"))}
    missing = sorted(c for c in cited if not (ROOT / c).is_file())
    assert cited and not missing, missing


def test_relative_links_in_readme_and_docs_resolve():
    """Every markdown link to a path (not a URL or an anchor) in README.md and docs/ points at a file."""
    bad = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                bad.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not bad, bad


def test_catalogue_page_is_generated_from_the_shipped_json():
    """docs/catalogue.md is what scripts/catalogue_table.py renders from the shipped pair's catalogue."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "catalogue_table.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
