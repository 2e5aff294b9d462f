# Two entry points for users: `make demo` (the main job) and `make test` (the test suite).
# Both create or update the venv first; re-running them is cheap and idempotent.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.grownup-installed

.PHONY: venv demo test test-deps docs bench clean

venv: $(STAMP)

# torch==2.13.0 is installed before anything that depends on torch, and constraints.txt pins it
# afterwards, so sentence-transformers / torch-geometric never pull a multi-GB CUDA build.
$(STAMP): setup.cfg pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e ".[test,eval,minilm,train,datatrove,docs,zyte]"
	touch $(STAMP)

demo: venv
	$(PY) -m example_project.demo

# Two tests need Debian packages: the inspect report is checked in headless Chromium
# (`chromium`), and the scale-out test runs a real `redis-server`. Where one is missing and
# apt-get can install it (root, e.g. CI), it is installed; elsewhere its test is skipped with a
# reason. datatrove's WarcReader (tests/test_datatrove.py) needs libmagic, which `file` brings.
define apt_need
	@command -v $(1) >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& (apt-get install -y -q $(2) >/dev/null 2>&1 || (apt-get update -q >/dev/null \
		&& apt-get install -y -q $(2) >/dev/null)) ; } \
		|| echo "$(2) not installed: the tests that need it will be skipped"
endef

test-deps:
	$(call apt_need,chromium,chromium)
	$(call apt_need,redis-server,redis-server)
	$(call apt_need,file,file)

test: venv test-deps
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q -p no:cacheprovider

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a warning (a broken link, a
# page left out of the nav, an API docstring mkdocstrings cannot read) fails the build.
docs: venv
	$(PY) -m mkdocs build --strict

bench: venv
	$(PY) benchmarks/featurize.py

clean:
	rm -rf $(VENV) build site *.egg-info
