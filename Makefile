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
	@# a rerun replaces only what the demo wrote; a folder holding anything else is refused
	rm -f $(OUT)/report.json $(OUT)/report.md $(OUT)/report.html $(OUT)/model.ckpt
	$(BIN)/gnnaudit audit --dataset synthetic --out $(OUT)

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
