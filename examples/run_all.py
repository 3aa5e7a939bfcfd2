"""Run every example's checks on one backend and print a line per check.

    python examples/run_all.py [--target T]

Each check compiles the example with tilecore (the default target unless
--target is given), runs it on fresh random inputs and compares with a numpy
formula. Exits non-zero when any check fails or an example raises.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

EXAMPLES = ("gemm", "softmax", "layernorm", "flash_attention")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=None, help="backend target (default: tilecore's default target)")
    parser.add_argument("--only", nargs="*", choices=EXAMPLES, help="run only these examples")
    args = parser.parse_args(argv)

    import tilecore

    target = args.target or tilecore.default_target()
    print(f"tilecore {tilecore.__version__}: running the examples on target {target!r}")
    failures = 0
    total = 0
    for name in args.only or EXAMPLES:
        module = importlib.import_module(name)
        start = time.perf_counter()
        try:
            results = module.check(target=target)
        except Exception as err:  # report and continue with the next example
            failures += 1
            total += 1
            print(f"FAIL  {name}: {type(err).__name__}: {err}")
            traceback.print_exc(file=sys.stderr)
            continue
        for r in results:
            print(r.line())
            total += 1
            failures += not r.passed
        print(f"      {name}: {len(results)} checks in {time.perf_counter() - start:.2f} s")
    print(f"{total - failures}/{total} checks passed" + ("" if not failures else f", {failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
