# The two entry points of the README: `make demo` (main job) and `make test`.
# Each creates .venv and installs requirements.txt on first use (or when it changes).
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-slow clean-venv

$(STAMP): requirements.txt
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

demo: $(STAMP)
	$(VPY) demo.py

test: $(STAMP)
	$(VPY) -m pytest -q -m "not slow" tests

test-slow: $(STAMP)
	$(VPY) -m pytest -q -m slow tests

clean-venv:
	rm -rf $(VENV)
