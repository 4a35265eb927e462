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
# The experiment's overhead budgets (docs/src/reading-a-report.md, "Budgets"), when experiments/budgets/ has a file of
# its name: `platbench run` refuses a bad file before any cell, the report after the campaign shows the verdicts; a
# failing budget never fails make lab (no --check).
BUDGETS ?= $(wildcard experiments/budgets/$(EXPERIMENT).yml)
# Run until decided (docs/src/calibrating.md): rounds are added until every ratio to bm is within ±PRECISION or
# MAX_TIME is spent (--until precision: a budget decided on a wide interval does not end it; the report still gives
# the verdicts); PRECISION= (empty) runs the experiment's repeats only. The smoke's answer (one duet pair at a time,
# the harness quiet: docs/src/calibrating.md, "A quiet harness") resolves ±1% in a few minutes; other sizes ±3%.
PRECISION ?= $(if $(filter answer,$(SIZE)),0.01,0.03)
MAX_TIME ?= $(if $(filter answer,$(SIZE)),10m,15m)
PYTEST_ARGS ?=

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: lab reproduce test lint sanity unit venv docs clean test-cloud-up test-cloud-down

# The campaign runs through `platbench run` (progress, ETA, summary; docs/src/running.md, "Running an experiment"). It
# exits 1 when a cell failed: the table of the others is still shown, and make then fails with that status.
lab: $(VENV)/.installed
	ansible-playbook site.yml
	campaign=$(CAMPAIGN); platbench run $(EXPERIMENT) --campaign $$campaign $(if $(SIZE),--size $(SIZE)) $(if $(BUDGETS),--budgets $(BUDGETS)) $(if $(PRECISION),--precision $(PRECISION) --max-time $(MAX_TIME) --until precision); status=$$?; \
	  if [ $$status -le 1 ] && [ -s results/$$campaign/samples.jsonl ]; then platbench report results/$$campaign $(if $(BUDGETS),--budgets $(BUDGETS)) || exit; \
	    platbench index results/$$campaign || exit; fi; \
	  exit $$status

# `make reproduce STUDY=lin2018 [MAX_TIME=2h]`: the lab built (nothing to do when it is), then the study's findings
# run on it until each is decided or MAX_TIME is spent; the verdicts, the page (results/reproduce-STUDY-*/) and a row
# per finding in the results store (docs/src/reproducing.md). FINDING=ID runs one finding.
STUDY ?=
reproduce: $(VENV)/.installed
	@if [ -z "$(STUDY)" ]; then echo "make reproduce: give STUDY=lin2018, xu2017, samani2022 or chopra2022" >&2; exit 2; fi
	ansible-playbook site.yml
	platbench reproduce $(STUDY) --max-time $(if $(filter command line environment,$(origin MAX_TIME)),$(MAX_TIME),2h) $(if $(FINDING),--finding $(FINDING))

# Four pytest runs, each exit status kept (tests/suite.py). First the unit tests marked `host` (they act on the host
# where a live lab would see them or suffer from them) on $(TEST_WORKERS) pytest-xdist workers. Then the lab tests in
# one process (one lab), and beside them, holding QUIET_LOCK, a process of its own (`python -m tests.suite
# beside-lab`) that runs the OpenStack tests (one test cloud; they share nothing with the lab), then, once the `lab`
# fixture has written LAB_BUILT, the other unit tests at a lower priority: a lab test leaves a core idle much of the
# time, and they fill it. The lab tests that assert a measured effect (marker `quiet`) run last and wait for the
# lock. The side runs' output is kept in OPENSTACK_LOG and UNIT_LOG and shown after the lab run's; the summary at the
# end adds up the four (PLATBENCH_TEST_DURATIONS). PYTEST_ARGS go to all.
TEST_WORKERS ?= 2
TEST_DURATIONS := $(CURDIR)/.cache/test-durations.json
QUIET_LOCK := $(CURDIR)/.cache/quiet.lock
LAB_BUILT := $(CURDIR)/.cache/lab-built
OPENSTACK_LOG := $(CURDIR)/.cache/openstack-tests.log
UNIT_LOG := $(CURDIR)/.cache/unit-tests.log
test: $(VENV)/.installed
	@mkdir -p $(dir $(TEST_DURATIONS)) && rm -f $(TEST_DURATIONS) $(OPENSTACK_LOG) $(UNIT_LOG) $(LAB_BUILT)
	export PLATBENCH_TEST_DURATIONS=$(TEST_DURATIONS) PLATBENCH_QUIET_LOCK=$(QUIET_LOCK) PLATBENCH_LAB_BUILT=$(LAB_BUILT); \
	pytest -n $(TEST_WORKERS) -m "host and not lab and not openstack" $(PYTEST_ARGS); host=$$?; \
	flock $(QUIET_LOCK) python -m tests.suite beside-lab $(OPENSTACK_LOG) $(UNIT_LOG) $(TEST_WORKERS) $$$$ $(PYTEST_ARGS) & side_pid=$$!; \
	for try in $$(seq 100); do flock -n $(QUIET_LOCK) true || break; sleep 0.1; done; \
	pytest -m lab $(PYTEST_ARGS); lab=$$?; touch $(LAB_BUILT); \
	wait $$side_pid; side=$$?; \
	echo "==== the OpenStack tests, run beside the lab tests ($(OPENSTACK_LOG)) ===="; cat $(OPENSTACK_LOG); \
	echo "==== the unit tests, run beside the lab tests once it was built ($(UNIT_LOG)) ===="; cat $(UNIT_LOG); \
	python -m tests.suite $(TEST_DURATIONS); \
	for status in $$host $$lab $$side; do [ $$status -eq 0 ] || exit $$status; done

lint: $(VENV)/.installed
	ansible-lint
	ruff check .
	ruff format --check .

# ansible-test sanity on the built and installed collection (pip for its venvs: tests/sanity/get_pip.py).
sanity: $(VENV)/.installed
	pytest tests/unit/test_collection.py $(PYTEST_ARGS)

# No lab, no test cloud: the tests marked `lab` or `openstack` are left out (docs/src/tests.md).
unit: $(VENV)/.installed
	pytest -n $(TEST_WORKERS) -m "not lab and not openstack" $(PYTEST_ARGS)

venv: $(VENV)/.installed

# The documentation site (docs/build.py): the guides of docs/src and the collection's reference generated by
# antsibull-docs, built by Sphinx with warnings as errors into .cache/docs/html (make test builds it too:
# tests/test_docs.py).
docs: $(VENV)/.installed
	python docs/build.py

# The OpenStack test cloud on 127.0.0.1 (docs/src/openstack.md "The test cloud"); `make test` starts its own when
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
