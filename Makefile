# gnnaudit developer commands. Every target sets up .venv on first use and
# reinstalls only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
OUT ?= out/demo

.PHONY: demo test bench lint format docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

demo: $(STAMP)
	@# --force replaces only the files gnnaudit wrote (its manifest lists them); nothing else
	$(BIN)/gnnaudit audit --dataset synthetic --out $(OUT) --force

# 2 pytest-xdist workers; each test module runs on one of them (tests/conftest.py).
# Bytecode is written (into the git-ignored __pycache__ folders) even where the shell sets
# PYTHONDONTWRITEBYTECODE: otherwise every worker and every subprocess of the suite compiles
# gnnaudit and the test modules again
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check gnnaudit tests examples benchmarks
	$(BIN)/ruff format --check gnnaudit tests examples benchmarks
	$(BIN)/mypy gnnaudit

# the documentation site: run the examples for the gallery (docs/gen_figures.py), then Sphinx
# with every warning an error; the docs extra is installed on first use
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python docs/gen_figures.py
	$(BIN)/python docs/gen_cli.py
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html
	@# the formulas must render offline: MathJax from the site itself, never a CDN
	test -f docs/_build/html/_static/mathjax/tex-chtml.js
	! grep -rlI "cdn.jsdelivr.net" docs/_build/html --include=*.html

format: $(STAMP)
	$(BIN)/ruff check --fix gnnaudit tests examples benchmarks
	$(BIN)/ruff format gnnaudit tests examples benchmarks

clean:
	rm -rf $(VENV) out .pytest_cache docs/_build docs/_generated
