# One virtual environment for everything; `make compare` and `make test` build it on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The pinned CPU wheel; override on a GPU machine, e.g. `make TORCH_SPEC=torch test`.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: compare test test-slow bench notebooks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

compare: $(STAMP)
	$(VENV)/bin/bnpzoo compare --data digits --out results

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	$(PY) benchmarks/bench_dp_gmm.py
	$(PY) benchmarks/bench_stochastic.py
	$(PY) benchmarks/bench_coupled.py
	$(PY) benchmarks/bench_coupled_rhat.py

notebooks: $(STAMP)
	$(VENV)/bin/jupytext --to notebook tutorials/*.py

clean:
	rm -rf $(VENV) results *.egg-info
