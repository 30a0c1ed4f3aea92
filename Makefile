# torchdevice: `make demo` and `make test` set up .venv themselves on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= auto

.PHONY: venv demo test test-fast catalog generate check-generated status bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[mlx,test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	TORCHDEVICE_LOG=info $(VENV)/bin/torchdevice run examples/gpt_train.py --steps 20
	$(VENV)/bin/torchdevice rewrite examples/gpt_train.py --diff; test $$? -le 1

test: $(STAMP) check-generated
	$(PY) -m pytest -n $(JOBS) -q

catalog: $(STAMP)
	$(PY) -m codegen.scan

generate: $(STAMP)
	$(PY) -m codegen

check-generated: $(STAMP)
	$(PY) -m codegen --check

status: $(STAMP)
	$(PY) -m codegen.status -n $(JOBS)

bench: $(STAMP)
	$(PY) -m bench

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy torchdevice codegen

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
