# platbench: `make lab` builds the local lab and runs the default experiment;
# `make test` runs every test. Both set up what they need (as root on Debian).
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
EXPERIMENT ?= smoke
# A size the experiment names in its `sizes` field (e.g. SIZE=small for xu2017-micro); empty: the file's own. The
# smoke's default is its `answer`: cn against bm, pinned, in duet pairs until decided (SIZE= runs its whole matrix).
SIZE ?= $(if $(filter smoke,$(EXPERIMENT)),answer)
CAMPAIGN ?= $(EXPERIMENT)-$(shell date +%Y%m%d-%H%M%S)
# The experiment's overhead budgets (README "Budgets"), when experiments/budgets/ has a file of its name: `platbench
# run` refuses a bad file before any cell, the report after the campaign shows the verdicts; a failing budget never
# fails make lab (no --check).
BUDGETS ?= $(wildcard experiments/budgets/$(EXPERIMENT).yml)
# Run until decided (README "Resolving power"): rounds are added until every ratio to bm is within ±PRECISION or
# MAX_TIME is spent (--until precision: a budget decided on a wide interval does not end it; the report still gives
# the verdicts); PRECISION= (empty) runs the experiment's repeats only.
PRECISION ?= 0.03
MAX_TIME ?= 15m
PYTEST_ARGS ?=

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: lab test lint sanity unit venv clean test-cloud-up test-cloud-down

# The campaign runs through `platbench run` (progress, ETA, summary; README "Running an experiment"). It exits 1
# when a cell failed: the table of the others is still shown, and make then fails with that status.
lab: $(VENV)/.installed
	ansible-playbook site.yml
	campaign=$(CAMPAIGN); platbench run $(EXPERIMENT) --campaign $$campaign $(if $(SIZE),--size $(SIZE)) $(if $(BUDGETS),--budgets $(BUDGETS)) $(if $(PRECISION),--precision $(PRECISION) --max-time $(MAX_TIME) --until precision); status=$$?; \
	  if [ $$status -le 1 ] && [ -s results/$$campaign/samples.jsonl ]; then platbench report results/$$campaign $(if $(BUDGETS),--budgets $(BUDGETS)) || exit; fi; \
	  exit $$status

# Three pytest runs, each exit status kept: the unit tests and lint on $(TEST_WORKERS) pytest-xdist workers (they
# share no file, port or engine); then the lab tests in one process (one lab), and beside them, in a process of its
# own, the OpenStack tests (one test cloud; they share nothing with the lab, and a lab test leaves a core idle much of
# the time). The OpenStack run holds QUIET_LOCK while it runs; the lab tests that assert a measured effect (marker
# `quiet`) run last and wait for it (tests/suite.py). Its output is kept in OPENSTACK_LOG and shown after the lab
# run's; the summary at the end adds up the three (tests/suite.py, PLATBENCH_TEST_DURATIONS). PYTEST_ARGS go to all.
TEST_WORKERS ?= 2
TEST_DURATIONS := $(CURDIR)/.cache/test-durations.json
QUIET_LOCK := $(CURDIR)/.cache/quiet.lock
OPENSTACK_LOG := $(CURDIR)/.cache/openstack-tests.log
test: $(VENV)/.installed
	@mkdir -p $(dir $(TEST_DURATIONS)) && rm -f $(TEST_DURATIONS) $(OPENSTACK_LOG)
	export PLATBENCH_TEST_DURATIONS=$(TEST_DURATIONS) PLATBENCH_QUIET_LOCK=$(QUIET_LOCK); \
	pytest -n $(TEST_WORKERS) -m "not lab and not openstack" $(PYTEST_ARGS); unit=$$?; \
	flock $(QUIET_LOCK) pytest -m "openstack and not lab" $(PYTEST_ARGS) > $(OPENSTACK_LOG) 2>&1 & cloud_pid=$$!; \
	for try in $$(seq 100); do flock -n $(QUIET_LOCK) true || break; sleep 0.1; done; \
	pytest -m lab $(PYTEST_ARGS); lab=$$?; \
	wait $$cloud_pid; cloud=$$?; \
	echo "==== the OpenStack tests, run beside the lab tests ($(OPENSTACK_LOG)) ===="; cat $(OPENSTACK_LOG); \
	python -m tests.suite $(TEST_DURATIONS); \
	for status in $$unit $$lab $$cloud; do [ $$status -eq 0 ] || exit $$status; done

lint: $(VENV)/.installed
	ansible-lint
	ruff check .
	ruff format --check .

# ansible-test sanity on the built and installed collection (pip for its venvs: tests/sanity/get_pip.py).
sanity: $(VENV)/.installed
	pytest tests/unit/test_collection.py $(PYTEST_ARGS)

# No lab, no test cloud: the tests marked `lab` or `openstack` are left out (README "Tests").
unit: $(VENV)/.installed
	pytest -n $(TEST_WORKERS) -m "not lab and not openstack" $(PYTEST_ARGS)

venv: $(VENV)/.installed

# The OpenStack test cloud on 127.0.0.1 (README "The test cloud"); `make test` starts its own when
# none is up. TEST_CLOUD_DIR (default .cache/test-cloud) and TEST_CLOUD_PORT_BASE (default 19000) place it.
test-cloud-up: $(VENV)/.installed
	$(VENV)/bin/python -m tests.openstack.testcloud up

test-cloud-down: $(VENV)/.installed
	$(VENV)/bin/python -m tests.openstack.testcloud down

# python3-venv is all the controller needs from the distribution, and rsync, which copies the wheelhouse and the
# workloads to the hosts (ansible.posix.synchronize); the playbooks install the rest.
# ansible-test creates its sanity venvs with it too. python3-apt lets the apt module run in
# check mode (a real run would install it by itself; tests/unit/test_collection.py runs check mode).
# chromium and chromium-driver: tests/unit/test_report_html.py loads report.html in a real headless browser.
$(VENV)/.installed: requirements.txt requirements-workload.txt pyproject.toml
	@{ $(PYTHON) -c 'import ensurepip, venv' && command -v rsync && { ! command -v apt-get || { /usr/bin/python3 -c 'import apt' \
	  && command -v chromium && command -v chromedriver; }; }; } >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get update -q \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv python3-pip python3-apt rsync \
	  chromium chromium-driver; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r requirements.txt
	$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

clean:
	rm -rf $(VENV) .cache results
