# The two commands a newcomer needs: `make run` and `make test`. Both set up what they use.
# `make demo` is `make run` with simulated incidents.
UV_VERSION := 0.13.9
UV := .uv/bin/uv
PY := .venv/bin/python

.PHONY: setup run demo test lint

$(UV):
	python3 -m venv .uv
	.uv/bin/pip install --quiet uv==$(UV_VERSION)

# Installs exactly what uv.lock pins, dev tools included.
setup: $(UV)
	$(UV) sync --locked --quiet

# Nothing spends tokens unasked: oikos_sim raises no incidents (docs/development.md, "Run").
run: setup
	$(PY) -m hermes_site.dev

# `run`, and oikos_sim raises simulated incidents (hermes_site/dev.py `--demo`), each investigated with the model.
demo: setup
	$(PY) -m hermes_site.dev --demo

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports
	.venv/bin/mypy common access agent oikos transcript api controlroom watch matrix interop evals hermes_site oikos_sim tests bench
