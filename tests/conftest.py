import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models are overhead-bound: one thread is as fast as two, and it does not collapse when
# another process (a notebook kernel, a second test run) shares the 2 cores. Kernels inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# The longest files first: with `-n 2 --dist loadfile` each file goes whole to one worker, in
# collection order, so a long file collected late becomes the run's tail while the other worker
# idles. These hold the long set-ups (notebook builds, vLLM start-ups, the real pair's doctor
# runs, JupyterLab in Chromium).
LONG_FIRST = ("report/test_notebooks.py", "engines/test_engine_record.py", "engines/test_engine.py",
              "doctor/test_doctor_real.py", "report/test_notebooks_recorded.py", "views/test_browser.py")


def pytest_configure(config):
    # xdist (3.x) reorders files by their number of tests unless told not to, which would undo the
    # order below: a five-test file holding a vLLM start-up then runs last, alone.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        path = item.nodeid.split("::")[0]
        return next((i for i, f in enumerate(LONG_FIRST) if path.endswith(f)), len(LONG_FIRST))
    items.sort(key=rank)          # stable: the order within a file and among the rest is kept
