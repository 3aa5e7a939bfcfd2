"""`tile bench FILE::FUNC [ARGS] --target T`: time a kernel and print median, spread and rates.

A @tilecore.autotune factory is tuned first (or its winner loaded from the tuning
cache), and the tuning report is printed before the timing.
"""

from __future__ import annotations

import json
import os
import re
import sys

from .loading import add_kernel_arguments, kernel_from_args, load_object, parse_factory_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="time a kernel on its device (median, spread, TFLOP/s, GB/s, fraction of peak)",
        description="Compile FILE::FUNC (FILE.py:FUNC also works) for a target, run it on random "
        "inputs and print the median time, its interquartile spread, and the TFLOP/s "
        "and GB/s that the Tile IR's work implies, against the device's peak when the "
        "backend states it. A @tilecore.autotune factory is tuned first.",
    )
    add_kernel_arguments(p)
    p.add_argument("--warmup", type=float, default=25, help="warm-up budget in ms (default 25)")
    p.add_argument("--rep", type=float, default=100, help="timing budget in ms (default 100)")
    p.add_argument("--n-repeat", type=int, default=None, help="timed runs (overrides --rep)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _normalize_reference(ref: str) -> str:
    """`FILE.py:FUNC` (the issue's spelling) as `FILE::FUNC` (the other commands')."""
    if "::" not in ref:
        return re.sub(r"\.py:(?=[A-Za-z_])", ".py::", ref, count=1)
    return ref


def _kernel(args):
    """(compiled Kernel, tuning report or None) for the command line."""
    from ..autotune import AutoTuner
    from ..runtime import api

    args.kernel = _normalize_reference(args.kernel)
    obj = load_object(args.kernel)
    if isinstance(obj, AutoTuner):
        if args.target:
            os.environ["TILECORE_TARGET"] = args.target  # the jit's own target, if any, still wins
        pos, kw = parse_factory_args(args.factory_args, args.arg)
        kernel = obj(*pos, **kw)
        return kernel, obj.last_report
    func, out_idx = kernel_from_args(args)
    return api.compile(func, target=args.target, out_idx=out_idx), None


def run(args) -> int:
    from ..profiler import bench

    kernel, report = _kernel(args)
    result = bench(
        kernel, warmup=args.warmup, rep=args.rep, n_repeat=args.n_repeat, n_warmup=None if args.n_repeat is None else 1
    )
    if args.json:
        record = result.to_dict()
        if report is not None:
            record["tuning"] = report.to_dict()
        sys.stdout.write(json.dumps(record, indent=1) + "\n")
        return 0
    if report is not None:
        sys.stdout.write(report.summary() + "\n")
    sys.stdout.write(result.summary() + "\n")
    return 0
