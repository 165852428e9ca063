"""Tests for what a reader meets in a rendered report (issue 28, item 4): the kernel's shutdown
prints no error, tables are shown whole, and the page opens on the title and question with a
one-line note of the parameters instead of the parameters and setup code.

The tests that execute start a real kernel through papermill (a few seconds each).
"""
from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from eagle_nb.report import execute as report_execute


def notebook(*cells) -> nbformat.NotebookNode:
    """A parameters cell (`x = 1`) followed by `cells` (code strings)."""
    params = new_code_cell("x = 1  # a parameter")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# Tiny\n\n**Question: what is x?**"), params,
                             *[new_code_cell(c) for c in cells]])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


# The last request papermill sends is a kernel_info_request, and it does not wait for the kernel to
# leave that request's handler before shutting the kernel down. This cell makes the handler
# linger after its reply (as a loaded machine does for a few milliseconds), so the race is certain.
SLOW_KERNEL_INFO = """\
import time
_k = get_ipython().kernel
_orig = _k.shell_handlers["kernel_info_request"]
async def _lingering(*args):
    await _orig(*args)
    time.sleep(1.5)          # the reply is sent: papermill is shutting the kernel down now
_k.shell_handlers["kernel_info_request"] = _lingering
"""


def test_kernel_shutdown_prints_no_keyboard_interrupt(tmp_path, capfd):
    """A notebook that ran to the end is shut down without an interrupt: the kernel prints no
    'KeyboardInterrupt caught in kernel' even when it is still inside a message handler (the
    `make reports` race); a failing cell is still reported."""
    src = tmp_path / "a.ipynb"
    nbformat.write(notebook(SLOW_KERNEL_INFO, "y = 2 * x"), src)
    seconds, error = report_execute.execute(src, tmp_path / "out.ipynb", {"x": 3}, progress=False)
    err = capfd.readouterr().err
    assert error is None and "KeyboardInterrupt" not in err and "ERROR" not in err, err
    nbformat.write(notebook(SLOW_KERNEL_INFO, "raise RuntimeError('boom')"), src)
    _, error = report_execute.execute(src, tmp_path / "out.ipynb", {}, progress=False)
    assert error is not None and "boom" in error


def test_report_tables_are_shown_whole(tmp_path):
    """A DataFrame displayed in a report keeps every row, column and character: pandas' defaults
    would cut a cell past 50 characters and elide rows past 60 and columns past 20 with '...'."""
    src = tmp_path / "a.ipynb"
    nbformat.write(notebook("import pandas as pd\n"
                            "pd.DataFrame({f'c{j}': [f'{i}:' + 'w' * 120 + '|end' for i in range(70)] "
                            "for j in range(25)})"), src)
    _, error = report_execute.execute(src, tmp_path / "out.ipynb", {}, progress=False)
    assert error is None, error
    table = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[-1].outputs[0]["data"]["text/html"]
    assert table.count("|end</td>") == 70 * 25 and "..." not in table and "…" not in table


def test_report_opens_on_the_title_with_a_parameters_note():
    """The rendered page hides the code of the parameters cell, of papermill's injected cell and
    of the setup cell (tagged `remove-input`), keeps the setup cell's output, and says in one
    line which parameters the run overrode; the notebook passed in is not changed."""
    from eagle_nb.report import html as report_html
    nb = notebook("# Setup (no need to read)\nimport os\nprint('setup says hi')", "print('body', x)")
    nb.cells[2].metadata["tags"] = [report_html.SETUP_TAG]
    injected = new_code_cell("# Parameters\nx = 21\ntarget_path = '/models/t'")
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(2, injected)
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="setup says hi\n")]
    before = nbformat.writes(nb)
    page = report_html.to_html(nb)
    assert nbformat.writes(nb) == before
    for code in ("a parameter", "# Parameters", "no need to read", "import os"):
        assert code not in page, code
    assert "setup says hi" in page and "body" in page and "Question: what is x?" in page
    note = ("<strong>Parameters</strong> of this run: <code>x = 21</code>, "
            "<code>target_path = '/models/t'</code>; every other parameter has its default")
    assert note in page
    assert page.index("Question: what is x?") < page.index(note) < page.index("setup says hi")
    nb.cells.pop(2)
    assert "<strong>Parameters</strong>: the notebook's defaults" in report_html.to_html(nb)


def test_every_shipped_notebook_tags_its_setup_cell():
    """Each shipped notebook's "# Setup (no need to read)" cell carries the tag that hides its code
    in the report (a rewritten notebook that loses the tag fails here, not in a reader's browser)."""
    from eagle_nb.io.paths import NOTEBOOKS_DIR
    from eagle_nb.report import html as report_html
    for path in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")):
        setup = [c for c in nbformat.read(path, as_version=4).cells
                 if c.cell_type == "code" and c.source.startswith("# Setup")]
        assert len(setup) == 1, path.name
        assert report_html.SETUP_TAG in setup[0].metadata.get("tags", []), path.name
