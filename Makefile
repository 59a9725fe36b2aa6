# gnnaudit developer commands. Every target sets up .venv on first use and
# reinstalls only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out/demo

.PHONY: demo test bench lint format clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

demo: $(STAMP)
	@# --force replaces only the files gnnaudit wrote (its manifest lists them); nothing else
	$(BIN)/gnnaudit audit --dataset synthetic --out $(OUT) --force

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check gnnaudit tests examples benchmarks
	$(BIN)/ruff format --check gnnaudit tests examples benchmarks
	$(BIN)/mypy gnnaudit

format: $(STAMP)
	$(BIN)/ruff check --fix gnnaudit tests examples benchmarks
	$(BIN)/ruff format gnnaudit tests examples benchmarks

clean:
	rm -rf $(VENV) out .pytest_cache
