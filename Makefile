# The two commands: `make demo` and `make test`. Both build .venv when it is missing
# or when pyproject.toml changed, and are quick on a second run.
# The editable install is a plain path entry (compat mode), not an import hook: the hook would
# import pathlib and typing at every interpreter start and skew the start-up benchmark.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint browser prometheus mcp-oldest bench chaos clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[full,dev]' \
		--config-settings editable_mode=compat
	@touch $(STAMP)

demo: $(STAMP)
	@rm -f $(VENV)/demo-journal.sqlite*  # the demo runs every time instead of resuming the last one
	$(BIN)/osmosis rollout run -m examples.calculator.agent:agent_loop -d examples/calculator/dataset.jsonl --model scripted \
		--journal $(VENV)/demo-journal.sqlite

lint: $(STAMP)
	$(BIN)/ruff check osmosis_ai tests benchmarks examples
	$(BIN)/ruff format --check osmosis_ai tests benchmarks examples
	$(BIN)/mypy

# pytest-xdist workers: on this 2-core machine 3 and 2 finish the suite in the same time (139 and 143 s
# side by side), the third overlapping the waits of subprocess and socket tests; PYTEST_WORKERS=0 runs
# it in one process. Bytecode is written (whatever PYTHONDONTWRITEBYTECODE says), so the next run's
# workers read their rewritten test modules instead of compiling them again (7 -> 4 s of CPU each).
PYTEST_WORKERS ?= 3

test: $(STAMP) lint browser prometheus mcp-oldest
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS)

# The login and HTML-report tests drive a real headless Chromium (Debian's package). Installed when
# missing and possible (root with apt-get); otherwise those tests are skipped with the reason.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
		|| echo "chromium not installed: the headless-browser tests (login, report) will be skipped"

# The /metrics tests check the page with `promtool` and scrape it with a real Prometheus (Debian's
# package, both programs). Installed when missing and possible; otherwise those tests are skipped.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq prometheus >/dev/null; } \
		|| echo "prometheus not installed: the /metrics scrape tests (promtool, Prometheus) will be skipped"

# The MCP tests also run against the oldest fastmcp the `mcp` extra allows: installed once with pip
# --target into .venv/fastmcp-<version>/ (a second run only checks a marker); skipped if pip cannot.
mcp-oldest: $(STAMP)
	@$(BIN)/python -m tests.support.fastmcp_oldest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.startup

# The fault suite (a few minutes): trainer faults and a 30 s outage, a SIGKILLed server, hostile agents,
# generated malformed inits, half-open connections, adversarial judge replies, every output flag onto
# a mknod device, a FIFO and a symlink; prints one table.
# Its short form runs inside `make test` (tests/benchmarks/test_chaos.py).
chaos: $(STAMP)
	$(BIN)/python -m benchmarks.chaos

clean:
	rm -rf $(VENV) build *.egg-info
