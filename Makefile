# The two commands: `make demo` and `make test`. Both build .venv when it is missing or when
# pyproject.toml changed, and are quick on a second run. The demo installs the package with the one
# extra its run needs ([server]: the agent is served on a local port); `make test` installs every
# extra and the tools into the same .venv.
# The editable install is a plain path entry in a .pth file, not an import hook (the hook would import
# pathlib and typing at every interpreter start and skew the start-up benchmark): pyproject.toml names
# the project root as the package root, for which setuptools writes the path entry by default.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# --no-compile: pip would compile every installed module to bytecode (two thirds of a fresh install's
# CPU: 93 s -> 50 s for every extra); the interpreter compiles the modules that are imported, once.
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check --no-compile
# The project's installs: uv with the package sources pip is configured with, or pip where uv cannot be
# had (scripts/install.py): every extra in ~15 s where pip takes 40 s on a fresh clone.
INSTALL := $(BIN)/python scripts/install.py
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test style lint types programs mcp-oldest upstream03 bench chaos clean

# uv at once, for every install after (scripts/install.py; without it pip installs them).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	-$(PIP) uv

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(INSTALL) -e '.[server]'
	@touch $@

# Everything the demo has too, so a demo after a test run installs nothing.
# verl and TransferQueue install their own test suites as a top-level `tests` package, which would
# shadow this repository's tests/ in every process the tests start (the editable path entry comes
# after site-packages): removed after the install.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(INSTALL) -c constraints.txt -e '.[all,dev]'
	rm -rf $(VENV)/lib/python*/site-packages/tests
	@touch $@ $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@rm -f $(VENV)/demo-journal.sqlite*  # the demo runs every time instead of resuming the last one
	$(BIN)/osmosis rollout run -m examples.calculator.agent:agent_loop -d examples/calculator/dataset.jsonl --model scripted \
		--journal $(VENV)/demo-journal.sqlite
	@echo "Next: score the agent with an eval function and open the report:"
	@echo "  $(BIN)/osmosis eval -m examples.calculator.agent:agent_loop -d examples/calculator/dataset.jsonl --model scripted --eval-fn examples.calculator.reward:calculator_reward --n 4 --report .venv/demo.html"
	@echo "then give --model a real model (e.g. openai/gpt-5-mini with OPENAI_API_KEY set): README, 'Quick start: testing and evaluating an agent'."

style: $(STAMP)
	$(BIN)/ruff check osmosis_ai tests benchmarks examples
	$(BIN)/ruff format --check osmosis_ai tests benchmarks examples

lint: style
	$(BIN)/mypy

# pytest-xdist workers: on this 2-core machine 5 finish the suite in 264 s where 4 take 275 s and 6 take
# 276 s (one after the other, a quiet machine; the cores idle 5.5%, 9.9% and 2.7% of the time): the
# subprocess, socket and deadline tests leave the cores idle part of their time, which a fifth worker
# fills, and a sixth costs more CPU than it fills; PYTEST_WORKERS=0 runs it in one process. Bytecode is
# written (whatever PYTHONDONTWRITEBYTECODE says), so the next run's workers read their rewritten test
# modules instead of compiling them again.
PYTEST_WORKERS ?= 5

# Bytecode, once after an install. On a fresh clone the pytest-xdist workers would each compile the same
# modules at the same moment: all of them as they collect the suite (~12 CPU-s apiece: the test modules
# as pytest rewrites them, the package, the libraries those import), LiteLLM (~4 CPU-s) as most of them
# first call a model, and every process of the two local Rays the Ray tests start side by side. Three
# processes compile them here, side by side and beside the other steps, and the workers read it. A
# failure here is left for pytest to report.
BYTECODE_STAMP := $(VENV)/.bytecode

$(BYTECODE_STAMP): $(STAMP)
	@export PYTHONDONTWRITEBYTECODE=; \
	$(BIN)/python -m pytest --collect-only -q >/dev/null 2>&1 & collected=$$!; \
	$(BIN)/python -c "import osmosis_ai._litellm as l; l.import_litellm()" & imported=$$!; \
	$(BIN)/python -m compileall -q osmosis_ai benchmarks examples tests $(VENV)/lib/python*/site-packages/ray \
		>/dev/null; compiled=$$?; \
	wait $$collected; collected=$$?; wait $$imported; imported=$$?; \
	[ $$collected$$imported$$compiled = 000 ] && touch $@ || true

# mypy for `make test`: its report and status kept for after pytest's, so the step can run beside the
# others (it never fails the step itself).
types: $(STAMP)
	@$(BIN)/mypy >$(VENV)/mypy.log 2>&1; echo $$? >$(VENV)/mypy.status

# The steps before pytest run side by side: apt-get fetching the programs and the two other
# virtualenvs' installs overlap the install of the project, then the bytecode's compiling and mypy
# (~13 CPU-s on a fresh clone), which fills the core the bytecode step leaves idle once its shorter jobs
# end. mypy's report follows pytest's, and either failing fails the target.
# --dist loadgroup: the tests of one xdist_group run on one worker (a group of Ray tests shares one local
# Ray; the local sandbox tests count the processes they leave).
test:
	@$(MAKE) --no-print-directory -j5 style programs mcp-oldest upstream03 $(BYTECODE_STAMP) types
	@PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup; tests=$$?; \
	echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ "$$(cat $(VENV)/mypy.status)" = 0 ]

# Programs some tests drive, from Debian's packages: Chromium (the login and HTML-report tests, headless),
# Prometheus with promtool (the /metrics scrape), redis-server (replicas sharing state, its outage) and
# bubblewrap (the sandbox's local tier: osmosis_ai/sandbox). Each is its package's name, but for
# bubblewrap, whose program is bwrap (package=program where they differ). The missing ones are installed in one apt-get run when possible (root with apt-get); otherwise
# their tests are skipped with the reason.
DEBIAN_PROGRAMS := chromium prometheus redis-server bubblewrap=bwrap

programs:
	@missing=""; for entry in $(DEBIAN_PROGRAMS); do package=$${entry%%=*}; program=$${entry#*=}; \
		command -v $$program >/dev/null 2>&1 || missing="$$missing $$package"; done; \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; } \
		|| echo "not installed:$$missing: their tests (browser, /metrics scrape, Redis state, sandbox) will be skipped"

# The MCP tests also run against the oldest fastmcp the `mcp` extra allows: installed once with
# --target into .venv/fastmcp-<version>/ (a second run only checks a marker); skipped if it cannot be.
# This and upstream03 need only the virtualenv's python and uv (their scripts import the standard
# library): they install beside the project's own install instead of after it.
mcp-oldest: | $(BIN)/python
	@$(BIN)/python -m tests.support.fastmcp_oldest

# Upstream osmosis-ai 0.3.8 in .venv-upstream03/ (Python 3.12 from pyenv or PATH), for the 0.3 interop
# tests; a marker file makes a second run a no-op (tests/support/upstream03.py).
upstream03: | $(BIN)/python
	@$(BIN)/python -m tests.support.upstream03

bench: $(STAMP)
	$(BIN)/python -m benchmarks.startup

# The fault suite (a few minutes): trainer faults and a 30 s outage, a SIGKILLed server, hostile agents,
# generated malformed inits, half-open connections, adversarial judge replies, every output flag onto
# a mknod device, a FIFO and a symlink; prints one table.
# Its short form runs inside `make test` (tests/benchmarks/test_chaos.py). Then the sandbox's: 200 model
# answers (right, wrong, hostile) through `osmosis reward score` with code_tests_reward, and 1,000
# sandbox runs of attacks whose scorers are SIGKILLed, processes counted (tests/sandbox/test_chaos.py).
chaos: $(STAMP)
	$(BIN)/python -m benchmarks.chaos
	$(BIN)/python -m benchmarks.chaos_sandbox --rows 200 --runs 1000

clean:
	rm -rf $(VENV) .venv-upstream03 build *.egg-info
