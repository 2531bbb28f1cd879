# One virtual environment, .venv/, for everything; `make compare` and `make test` build it on
# first use, from nothing, with the versions in constraints.txt (the lock the tests passed with).
PYTHON ?= python3
VENV := .venv
LATEST := .venv-latest
LOCK := constraints.txt
# torch's build is the platform's choice. The default is the CPU wheel (on this project's machines
# it lies on disk); on a GPU machine `make TORCH_SPEC=torch test` takes PyPI's CUDA build of the
# locked version; elsewhere on Linux, for the CPU build,
# `make TORCH_FLAGS="--index-url https://download.pytorch.org/whl/cpu" test`.
TORCH_SPEC ?= torch==2.13.0
TORCH_FLAGS ?=
comma := ,

.PHONY: install compare test test-slow test-latest lock bench notebooks docs clean

# $(call environment,FOLDER,PIP CONSTRAINT FLAGS,EXTRAS): a new virtual environment in FOLDER
define environment
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "bnpzoo needs Python 3.11 or newer: make PYTHON=python3.11 ...")'
	@echo "==> building $(1)/ from nothing (1 to 3 minutes the first time; later runs reuse it)"
	rm -rf $(1)
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --upgrade $(2) pip
	$(1)/bin/python -m pip install $(2) $(TORCH_FLAGS) "$(TORCH_SPEC)"
	$(1)/bin/python -m pip install $(2) -e ".[$(3)]"
endef

$(VENV)/.installed: pyproject.toml $(LOCK)
	$(call environment,$(VENV),-c $(LOCK),dev)
	touch $@
	@echo "==> ready: .venv/bin/bnpzoo, or 'source .venv/bin/activate' to put bnpzoo on the PATH"

install: $(VENV)/.installed

compare: $(VENV)/.installed
	$(VENV)/bin/bnpzoo compare --data digits --out results

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -n auto --dist worksteal

test-slow: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -n auto --dist worksteal -m slow

# The newest versions pyproject.toml allows (torch excepted: TORCH_SPEC), in a throw-away
# environment: a release that breaks us shows here before a user meets it.
test-latest:
	$(call environment,$(LATEST),,dev$(comma)bench)
	$(LATEST)/bin/python -m pytest -q -n auto --dist worksteal

# Refresh the lock: the newest versions, written to constraints.txt only if their tests pass.
lock: test-latest
	{ echo "# Versions the test suite passed with (make lock: newest allowed, tested, then frozen)."; \
	  echo "# Python $$($(LATEST)/bin/python -c 'import platform; print(platform.python_version())'), $$(date +%F)."; \
	  $(LATEST)/bin/python -m pip freeze --all --exclude-editable | sed -E 's/^(torch==[^+]*)\+.*/\1/'; } > $(LOCK)

bench: $(VENV)/.installed
	$(VENV)/bin/python -m pip install -c $(LOCK) -e ".[dev,bench]"
	$(VENV)/bin/python benchmarks/bench_dp_gmm.py
	$(VENV)/bin/python benchmarks/bench_seeds.py
	$(VENV)/bin/python benchmarks/bench_stochastic.py
	$(VENV)/bin/python benchmarks/bench_pyp_ggm.py
	$(VENV)/bin/python benchmarks/bench_hdp_gd.py
	$(VENV)/bin/python benchmarks/bench_coupled.py
	$(VENV)/bin/python benchmarks/bench_coupled_documents.py
	$(VENV)/bin/python benchmarks/bench_coupled_rhat.py
	$(VENV)/bin/python benchmarks/bench_coupled_scale.py

# The tutorials as notebooks: tutorials/*.ipynb from their sources, and each one executed by the
# set-up's own nbclient and ipykernel into docs/tutorials/ with its outputs and figures
# (docs/notebooks.py; a warning printed in any cell fails it).
notebooks: $(VENV)/.installed
	$(VENV)/bin/python docs/notebooks.py --execute

# The documentation site, into build/docs/ (open build/docs/index.html): the guide, the API
# reference from the docstrings, the executed tutorials, the benchmark reports. Any Sphinx
# warning is an error, as in tests/test_docs.py.
docs: notebooks
	$(VENV)/bin/sphinx-build -W --keep-going -q -c docs -b html . build/docs
	@echo "==> build/docs/index.html"

clean:
	rm -rf $(VENV) $(LATEST) results build docs/tutorials *.egg-info

