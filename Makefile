# The two commands: `make run` (install, obtain the default judge, run the demo end to end)
# and `make test` (install dev extras, lint and type-check, prepare the registry judges, run the whole suite on two
# workers, pytest-xdist). Both reuse .venv and the model cache.
VENV := .venv
PY := $(VENV)/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint install install-dev bench docs dist clean

install:
	@bash scripts/install.sh

install-dev:
	@EXTRAS=dev bash scripts/install.sh

run: install
	@$(VENV)/bin/litjudge judges --prepare smollm2-135m >/dev/null
	@$(VENV)/bin/litjudge run runs/demo.toml

# --max-worker-restart=0: a worker that dies (out of memory, say) ends the run at once, naming its
# test; pytest-xdist 3.8 hangs under loadgroup when it replaces a crashed worker (its issue #1378).
# The suite runs every registry judge: they are obtained and converted into the model cache first (as
# `make run` does the default one; once per machine), and the tests only read that cache (checked).
test: install-dev lint
	@$(VENV)/bin/litjudge judges --prepare >/dev/null
	@$(PY) -m pytest -q -n 2 --dist loadgroup --max-worker-restart=0 --durations=15 tests judges/metrics --doctest-modules; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# Lint and type check first (seconds): ruff over everything, mypy over the whole package
# (scripts/typecheck.py: mypy with each module under its installed name; engine/ is litjudge.engine).
lint: install-dev
	@$(VENV)/bin/ruff check --quiet .
	@$(PY) scripts/typecheck.py --no-error-summary

# The documentation site (docs/, mkdocs.yml) into site/: offline, and it opens from the file system
# (site/index.html). `make test` builds it too (tests/test_docs.py) and runs its examples.
docs: install-dev
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet
	@echo "site/index.html"

# The wheel and the sdist into dist/ (`python -m build`: each built in its own fresh environment, as a
# package index builds them). `pip install dist/litjudge-*.whl[cpu]` installs it (docs: getting-started.md).
dist: install-dev
	@rm -rf dist
	@$(PY) -m build --outdir dist . >/dev/null
	@ls dist/*

bench: install
	@$(VENV)/bin/litjudge bench

clean:
	rm -rf runs/out .pytest_cache site dist
