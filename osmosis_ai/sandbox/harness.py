"""The program that runs ``code`` inside the sandbox (copied in as a file; standard library only).

It reads its input file (``nonce`` and ``tests``, marshalled: ``marshal`` is built in, where
``json`` would import ``re`` and cost every run milliseconds) and deletes it before any of the code
runs (or, in a sandbox started ahead of its run, reads them and the run's files on stdin), runs
``main.py``, then each test in the same namespace, and reports on file descriptor ``argv[1]``: one
line per event, each starting with the nonce, so the code cannot forge a report by writing to that
descriptor without first reading the harness's memory (docs/design/sandbox.md, what it does not
stop). ``started`` proves the sandbox came up; a missing report is the sandbox's failure, never the
code's. Exit status: 0 when the code ran and every test passed, 1 otherwise.
"""

import marshal
import os
import sys

INPUT = ".osmosis-input.json"
MAIN = "main.py"


def _print_traceback() -> None:
    import traceback  # only when something failed: its imports cost every run otherwise

    traceback.print_exc()


def _given() -> tuple:
    """The nonce and the tests; a sandbox started ahead of its run (``argv[2]`` is ``stdin``) first
    reads them on stdin, then each of the run's files (their names and sizes given with the tests),
    copied to disk a piece at a time: the harness's memory is capped as the code's is, and a fresh
    sandbox's files never pass through it."""
    if sys.argv[2:] != ["stdin"]:
        with open(INPUT, "rb") as given:
            nonce, tests = marshal.loads(given.read())
        os.unlink(INPUT)
        return nonce, tests
    stdin = sys.stdin.buffer
    try:
        nonce, tests, sizes = marshal.load(stdin)  # reads exactly the header, not past it
    except EOFError:  # no run came (the pool closed, or its process is gone), or part of one
        os._exit(0)
    for name, size in sizes:
        if os.path.dirname(name):
            os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(name, "wb") as file:
            while size:
                piece = stdin.read(min(size, 1 << 16))
                if not piece:  # the run was cut short: none of it runs
                    os._exit(1)
                file.write(piece)
                size -= len(piece)
    return nonce, tests


def main() -> None:
    report = int(sys.argv[1])
    nonce, tests = _given()

    def tell(line: str) -> None:
        os.write(report, f"{nonce} {line}\n".encode())

    tell("started")
    namespace = {"__name__": "__main__" if tests is None else "solution", "__file__": MAIN}
    try:
        with open(MAIN, encoding="utf-8") as file:
            source = file.read()
        exec(compile(source, MAIN, "exec"), namespace)
    except MemoryError:
        tell("memory")
        os._exit(1)
    except SystemExit as exc:  # the code ended itself: its status, tests still run
        if exc.code not in (None, 0):
            _print_traceback()
            sys.stderr.flush()
            os._exit(1)
    except BaseException:
        _print_traceback()
        sys.stderr.flush()
        os._exit(1)
    failed = 0
    for index, test in enumerate(tests or ()):
        try:
            exec(compile(test, f"<test {index}>", "exec"), namespace)
        except MemoryError:
            tell("memory")
            os._exit(1)
        except BaseException as exc:
            failed += 1
            print(
                f"test {index} failed: {test.strip()[:200]}: {type(exc).__name__}: {exc}"[:1000],
                file=sys.stderr,
            )
        else:
            tell(f"pass {index}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main()
