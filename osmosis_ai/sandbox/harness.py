"""The program that runs ``code`` inside the sandbox (copied in as a file; standard library only).

It reads its input file (``nonce`` and ``tests``) and deletes it before any of the code runs, runs
``main.py``, then each test in the same namespace, and reports on file descriptor ``argv[1]``: one
line per event, each starting with the nonce, so the code cannot forge a report by writing to that
descriptor without first reading the harness's memory (docs/design/sandbox.md, what it does not
stop). ``started`` proves the sandbox came up; a missing report is the sandbox's failure, never the
code's. Exit status: 0 when the code ran and every test passed, 1 otherwise.
"""

import json
import os
import sys
import traceback

INPUT = ".osmosis-input.json"
MAIN = "main.py"


def main() -> None:
    report = int(sys.argv[1])
    with open(INPUT) as file:
        job = json.load(file)
    os.unlink(INPUT)
    nonce, tests = job["nonce"], job["tests"]
    del job

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
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
    except BaseException:
        traceback.print_exc()
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
