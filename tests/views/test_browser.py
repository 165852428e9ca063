"""JupyterLab in a real browser: the live panel of notebook 03, as a user meets it.

Starts JupyterLab on 127.0.0.1 (free port, random token, `--allow-root`, its own workspace and
runtime directories; stopped on every exit path), opens a copy of 03 with a small workload in
Playwright-driven system Chromium (no browser download), runs all cells, ticks a fault in the
live panel and checks that the panel's text *and* image show the new setting. The copy sits
outside the repository, so this also checks that a copied notebook finds the shipped `data/`
(through the installed `eagle_nb` package). The precomputed controls of a rendered report are
driven the same way in test_notebooks.py (they need the built reports).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

import helpers
from eagle_nb.io.paths import NOTEBOOKS_DIR, REPO_ROOT


pytestmark = helpers.needs_playwright()
SMALL = {"n_prompts": 2, "max_new_tokens": 16}      # a small workload: the test is about the UI


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, notebook dir) of a JupyterLab server holding a small copy of 03."""
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.read(NOTEBOOKS_DIR / "03_fc_bypass_ablation.ipynb", as_version=4)
    params = nb.cells[1]
    for k, v in SMALL.items():
        params.source, n = re.subn(rf"^{k} = \S+", f"{k} = {v}", params.source, flags=re.M)
        assert n == 1, k
    nbformat.write(nb, root / "03.ipynb")
    port, token = helpers.free_port(), secrets.token_hex(16)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
           "JUPYTER_CONFIG_DIR": str(root / ".config"), "JUPYTER_DATA_DIR": str(root / ".data"),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabServerApp.workspaces_dir={root / '.workspaces'}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield base, token, root
    finally:                                   # server and kernels: the whole process group
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def panel_state(page) -> dict:
    """The live panel's status line, text, and image (alt and src) as the browser shows them."""
    return page.evaluate("""() => {
        const st = document.querySelector('.enb-status');
        const text = document.querySelector('.enb-text');
        const img = text && text.parentElement.querySelector('img');
        return {status: st ? st.textContent : null, busy: st ? st.dataset.busy : null,
                text: text ? text.textContent : null, alt: img ? img.alt : null,
                src: img ? img.src.slice(-200) : null};
    }""")


def test_live_panel_in_jupyterlab_shows_the_chosen_setting(lab):
    """Run All on 03 in JupyterLab: the panel draws healthy; ticking fc-bypass shows at once what
    is being computed, then text and image both show fc-bypass; no cell raised."""
    from playwright.sync_api import sync_playwright
    base, token, _ = lab
    t0 = time.monotonic()
    with sync_playwright() as pw:
        browser = helpers.launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/03.ipynb?token={token}")
            page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-Notebook')",
                                   timeout=90_000)
            page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
                return w && w.sessionContext && w.sessionContext.session &&
                       w.sessionContext.session.kernel &&
                       w.sessionContext.session.kernel.status === 'idle'; }""", timeout=120_000)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function("""() => { const s = document.querySelector('.enb-status');
                const i = document.querySelector('.enb-text + img');
                return s && s.dataset.busy === '0' && i && i.alt === 'healthy, k=4, T=0'; }""",
                                   timeout=400_000)
            before = panel_state(page)
            assert before["text"].startswith("healthy: τ") and "figure shows healthy, k=4, T=0" in before["status"]
            page.evaluate("""() => { window.__statuses = [];        // every status the user saw
                const root = document.querySelector('.enb-status').closest('.widget-vbox');
                new MutationObserver(() => { const s = document.querySelector('.enb-status');
                    if (s) window.__statuses.push(s.dataset.busy + ' ' + s.textContent); })
                  .observe(root, {subtree: true, childList: true, characterData: true}); }""")
            page.locator(".widget-checkbox", has_text="fc-bypass").locator("input").click()
            page.wait_for_function("""() => { const i = document.querySelector('.enb-text + img');
                const s = document.querySelector('.enb-status');
                return i && i.alt === 'fc-bypass, k=4, T=0' && s.dataset.busy === '0'; }""",
                                   timeout=120_000)
            after = panel_state(page)
            assert after["text"].startswith("fc-bypass: τ") and "vs healthy τ" in after["text"]
            assert after["src"] != before["src"]
            assert "figure shows fc-bypass, k=4, T=0" in after["status"]
            seen = page.evaluate("() => window.__statuses")
            busy = [x for x in seen if x.startswith("1 ")]
            assert busy and all("computing fc-bypass, k=4, T=0" in x for x in busy), seen
            assert "figure shows healthy, k=4, T=0" in busy[0]     # and what the old figure is
            page.wait_for_function("""() => window.jupyterapp.shell.currentWidget.sessionContext
                .session.kernel.status === 'idle'""", timeout=120_000)
            errors = page.locator("[data-mime-type='application/vnd.jupyter.error']").count()
            assert errors == 0, page.locator("[data-mime-type='application/vnd.jupyter.error']").first.inner_text()
            assert page.get_by_text("Precomputed panel not built here").count() == 1
        finally:
            browser.close()
    print(f"browser test: {time.monotonic() - t0:.1f} s after JupyterLab started")
