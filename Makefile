# torchdevice: `make demo` and `make test` set up .venv themselves on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= auto
# torch is pinned for this project's own environments (the catalog is scanned from 2.13.0); the
# package itself declares the range it supports (pyproject.toml).
PIP_INSTALL := $(PY) -m pip install -q -c constraints.txt

.PHONY: venv venv-torch torch-wheels catalog-release test-torch browser demo test test-fast test-consistency external-suites catalog mps-messages cuda-alerts generate check-generated status bench lint docs wheel clean

$(STAMP): pyproject.toml constraints.txt torchdevice.pth
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) -e '.[mlx,dev]'
	# tests run timm's apex-guarded fast_norm; timm's torchvision requirement would pull a CUDA torch
	$(PIP_INSTALL) --no-deps 'timm==1.0.31'
	# ultralytics (its other requirements: the dev extra) needs torchvision, whose only build for this torch is a
	# CUDA one: installed without dependencies (they would pull a CUDA torch), its operators completed in every
	# process of this environment by tests/environment/cpu_torchvision.py (imported by a .pth file)
	$(PIP_INSTALL) --no-deps 'ultralytics==8.4.190' 'torchvision==0.28.0'
	printf '%s\nimport cpu_torchvision\n' '$(CURDIR)/tests/environment' \
		> "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/cpu_torchvision.pth"
	# mamba-ssm and causal-conv1d are sdists that compile CUDA (or fetch a CUDA wheel) by default: built without
	# their CUDA extensions (under the runtime those are torchdevice's stand-ins), against this torch, without
	# dependencies (torch; mamba-ssm's Mamba3 kernels' tilelang and quack-kernels); triton and einops: the dev extra
	MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE CAUSAL_CONV1D_FORCE_BUILD=TRUE \
		$(PIP_INSTALL) --no-build-isolation --no-deps 'causal-conv1d==1.7.0' 'mamba-ssm==2.3.2.post1'
	touch $(STAMP)

venv: $(STAMP)

# Another torch release's environment, .venv-torch/RELEASE-BUILD: that release from PyPI (--isolated and
# PIP_CONFIG_FILE=/dev/null leave this machine's pip configuration out), then the package with its extras beside it,
# under a constraint that keeps that torch. PyPI's Linux wheels are CUDA builds (BUILD=cuda); BUILD=cpu takes
# PyTorch's own index of CPU builds.
TORCH ?= 2.15.0
BUILD ?= cuda
TORCH_VENV := .venv-torch/$(TORCH)-$(BUILD)
TORCH_PY := $(TORCH_VENV)/bin/python
TORCH_PIP := PIP_CONFIG_FILE=/dev/null $(TORCH_PY) -m pip install -q --isolated -c $(TORCH_VENV)/constraints.txt
TORCH_INDEX_cuda :=
TORCH_INDEX_cpu := --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple

TORCH_WHEELS := .cache/wheels/torch-$(TORCH)-$(BUILD)

# What comes from the registry: the environment's pip, then that release and what it needs (its CUDA libraries: about
# 2.7 GB) downloaded, three tries 30 s apart. A registry that drops the connection is not this project's failure:
# `.ci/run` tells the two apart by this target.
$(TORCH_WHEELS)/.downloaded:
	@case "$(BUILD)" in cpu|cuda) ;; *) echo "BUILD=$(BUILD): cpu or cuda" >&2; exit 2;; esac
	test -x $(TORCH_PY) || $(PYTHON) -m venv $(TORCH_VENV)
	for try in 1 2 3; do \
		PIP_CONFIG_FILE=/dev/null $(TORCH_PY) -m pip install -q --isolated --upgrade pip \
		&& PIP_CONFIG_FILE=/dev/null $(TORCH_PY) -m pip download -q --isolated --resume-retries 10 \
			$(TORCH_INDEX_$(BUILD)) -d $(TORCH_WHEELS) 'torch==$(TORCH)' numpy && break; \
		[ $$try = 3 ] && { echo "torch $(TORCH) ($(BUILD)) could not be downloaded" >&2; exit 1; }; sleep 30; \
	done
	touch $@

torch-wheels: $(TORCH_WHEELS)/.downloaded

$(TORCH_VENV)/.installed: pyproject.toml torchdevice.pth $(TORCH_WHEELS)/.downloaded
	test -x $(TORCH_PY) || $(PYTHON) -m venv $(TORCH_VENV)  # (the download may be older than this environment)
	echo 'torch==$(TORCH)' > $(TORCH_VENV)/constraints.txt
	$(TORCH_PIP) --no-index --find-links $(TORCH_WHEELS) torch numpy
	$(TORCH_PIP) -e '.[mlx,dev]'
	touch $@

venv-torch: $(TORCH_VENV)/.installed

# Another release's facts, kept as what differs from the catalog's (catalog/releases/RELEASE.yaml): scanned by that
# release's Python from itself, its macOS wheel (downloaded, never installed) and its CUDA wheel (BUILD=cuda's own).
catalog-release: $(TORCH_VENV)/.installed
	@[ "$(BUILD)" = cuda ] || { echo "catalog-release reads the CUDA wheel: BUILD=cuda" >&2; exit 2; }
	PIP_CONFIG_FILE=/dev/null $(TORCH_PY) -m pip download -q --isolated --no-deps --only-binary=:all: \
		--platform macosx_14_0_arm64 -d .cache/wheels 'torch==$(TORCH)'
	$(TORCH_PY) -m codegen.scan.release .cache/wheels/torch-$(TORCH)-*-macosx_*_arm64.whl \
		$$(ls $(TORCH_WHEELS)/torch-$(TORCH)-*-manylinux_*x86_64.whl)

# One torch release's tier, in its environment: every test that starts no process, and those marked `release` (one
# program per feature that starts processes: the example GPT on each target, spawn, torchrun DDP, a notebook,
# DeepSpeed). The facts tests compare with the catalog's own release skip on another.
test-torch: $(TORCH_VENV)/.installed
	$(TORCH_PY) -m pytest -n $(JOBS) --maxschedchunk=1 -q -m "release or not (processes or consistency)"

# The headless browser the report page's tests open it in (tests/report/test_report_page.py): nothing when one is
# here, else Chromium from the system's packages where apt-get runs as root (CI); elsewhere those tests skip.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq \
		     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
		|| echo "no Chromium here: the report page's tests skip (apt-get install chromium)"

demo: $(STAMP)
	TORCHDEVICE_LOG=info $(VENV)/bin/torchdevice run examples/gpt_train.py --steps 20
	$(VENV)/bin/torchdevice rewrite examples/gpt_train.py --diff; test $$? -le 1

# The whole suite (CI runs it, and `make lint`).
# Tests that start processes come first (tests/conftest.py), handed to the workers one by one as they free up.
test: $(STAMP) check-generated browser
	$(PY) -m pytest -n $(JOBS) --maxschedchunk=1 -q

# The edit-test tier: every test that starts no process (tests/conftest.py holds the marker to that).
test-fast: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q -m "not processes and not consistency"

# The consistency tier (not in `test`): every OpInfo op and dtype, written for CUDA, on the simulated Mac
# against the CPU; `make test-consistency CONSISTENCY_TARGET=cpu` (or cuda-sim) runs it on that target.
CONSISTENCY_TARGET ?= mps-sim
test-consistency: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q -m consistency --consistency-target=$(CONSISTENCY_TARGET) tests/consistency

# The own test suites of skorch, pytorch-ignite and accelerate, natively and under the runtime (not in `test`).
# `make external-suites EXTERNAL_TARGET=cuda-sim` runs them under that target (default: the runtime's).
external-suites: $(STAMP)
	$(PIP_INSTALL) -e '.[mlx,dev,external]'
	$(PY) tests/external/suites.py $(if $(EXTERNAL_TARGET),--target $(EXTERNAL_TARGET))

catalog: $(STAMP)
	$(PY) -m codegen.scan

# MPS's messages: torch's own macOS arm64 wheel (downloaded, never installed) scanned into catalog/scanned/.
mps-messages: $(STAMP)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --platform macosx_14_0_arm64 \
		-d .cache/wheels "torch==$$($(PY) -c 'import torch; print(torch.__version__.split("+")[0])')"
	$(PY) -m codegen.scan.mps_messages

# torch's CUDA wheel for Linux x86-64, from PyPI (--isolated: a local find-links' CPU build of the same version is
# not it); its code is read with binutils' objdump
cuda-alerts: $(STAMP)
	$(PY) -m pip download -q --isolated --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
		--index-url https://pypi.org/simple -d .cache/wheels \
		"torch==$$($(PY) -c 'import torch; print(torch.__version__.split("+")[0])')"
	$(PY) -m codegen.scan.cuda_alerts

generate: $(STAMP)
	$(PY) -m codegen

check-generated: $(STAMP)
	$(PY) -m codegen --check

status: $(STAMP)
	$(PY) -m codegen.status -n $(JOBS)

# `make bench RECORD=1` also writes the results into docs/measurements/bench.json, which the site's Performance page
# is rendered from (in place of the recorded results of the benchmarks run); TOPICS=... runs only those.
bench: $(STAMP)
	$(PY) -m bench $(if $(RECORD),--record docs/measurements/bench.json) $(TOPICS)

lint: $(STAMP)
	$(PY) -m ruff check .
	MYPYPATH=generated $(PY) -m mypy -p torchdevice_generated -p torchdevice -p codegen

# The documentation site (mkdocs.yml, docs/) into site/: strict, so a warning (a broken link or anchor, a page
# outside the nav) fails the build; docs/hooks.py renders the pages' tables from the data they show.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

wheel: $(STAMP)
	$(PY) -m pip wheel -q --no-deps -w dist .

clean:
	rm -rf $(VENV) build dist .pytest_cache
