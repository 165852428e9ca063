# Two commands do all set-up on a fresh machine with Python 3.11 and pip:
#   make reports   # venv + install + execute the notebooks + render HTML reports into reports/
#   make test      # venv + install + the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build lies on local disk here; set TORCH= (empty) to keep a torch you installed yourself.
TORCH ?= torch==2.13.0
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-slow reports lab bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH)" ] && ! $(PY) -c "import torch" 2>/dev/null; then \
		echo "installing $(TORCH)"; $(PY) -m pip install -q "$(TORCH)"; fi
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

test: install
	@command -v chromium >/dev/null 2>&1 || (apt-get install -y -qq chromium >/dev/null 2>&1 \
		|| (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) \
		|| echo "note: chromium not installed; the rendered-report browser test will be skipped")
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow

reports: install
	$(PY) -m eagle_nb report --out reports

# JupyterLab on this machine only (127.0.0.1); --allow-root so it also starts in a root container.
# Open the URL it prints (it carries the login token).
lab: install
	$(PY) -m jupyter lab --allow-root --ip=127.0.0.1 --notebook-dir=notebooks

bench: install
	$(PY) benchmarks/capture_overhead.py
	$(PY) benchmarks/speculate.py

clean:
	rm -rf reports .pytest_cache
