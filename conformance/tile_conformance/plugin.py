"""The `tile conformance ...` subcommands (registered through the tilecore_cli_commands hook).

tile conformance BACKEND [--examples N] [--seed S] [--tier execute|compile] [--option NAME=VALUE]
                         [--report out.json] [--ray [ADDRESS]]
tile conformance verify REPORT.json [--must-pass FILE]
tile conformance rerun REPORT.json [--backend NAME] [--all] [--report out.json]
tile conformance build-bundle BACKEND DIR [--examples N] [--seed S]
tile conformance run-bundle DIR --expect-digest SHA256 [--backend NAME] [--report out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from tilecore.plugin import hookimpl

USAGE = """\
tile conformance BACKEND [--examples N] [--seed S] [--tier execute|compile] [--option NAME=VALUE]
                         [--report out.json] [--ray [ADDRESS]]
tile conformance verify REPORT.json [--must-pass FILE]
tile conformance rerun REPORT.json [--backend NAME] [--all] [--report out.json]
tile conformance build-bundle BACKEND DIR [--examples N] [--seed S]
tile conformance run-bundle DIR --expect-digest SHA256 [--backend NAME] [--report out.json]"""


@hookimpl
def tilecore_cli_commands(subparsers):
    """Add `tile conformance`."""
    p = subparsers.add_parser(
        "conformance",
        help="certify a backend against the reference interpreter (tile-conformance)",
        usage=USAGE,
        description="Generate tile programs with hypothesis, run them on BACKEND and on the "
        "reference interpreter, compare, shrink failures, and write a report.",
        add_help=False,
    )
    p.add_argument("-h", "--help", action=_Help, nargs=0, help="show this help and exit")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: main(args.argv))


class _Help(argparse.Action):
    """`tile conformance --help`: the forms of the command (each form has its own --help)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print("usage:\n" + "\n".join("  " + line for line in USAGE.splitlines()))
        print("\nEach form takes --help, e.g. `tile conformance cpu --help`. See the tile-conformance README.")
        parser.exit(0)


def _run_parser() -> argparse.ArgumentParser:
    from .runner import DEFAULT_EXAMPLES

    p = argparse.ArgumentParser(prog="tile conformance", usage=USAGE)
    p.add_argument("backend", help="backend name as `tile backends` lists it (cpu, cuda, npu, reference, ...)")
    p.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        help=f"number of generated programs (default {DEFAULT_EXAMPLES})",
    )
    p.add_argument("--seed", type=int, default=0, help="generation seed: the same seed gives the same programs")
    p.add_argument(
        "--tier",
        choices=("execute", "compile"),
        default="execute",
        help="execute: run and compare results; compile: generate code with the real toolchain only",
    )
    p.add_argument("--report", default=None, help="write the JSON report here (and Markdown next to it)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a compile option for every program (VALUE as JSON: true, 3, or a bare string); an option "
        "that declares capabilities (e.g. cuda's fast_math) changes what is certified",
    )
    p.add_argument(
        "--families",
        default=None,
        help="comma-separated program families (ewise,copy,reduce,gemm,atomic,cumsum,control)",
    )
    p.add_argument("--no-shrink", action="store_true", help="report failures without shrinking them")
    p.add_argument("--max-shrinks", type=int, default=4, help="failures to shrink (default 4)")
    p.add_argument("--shrink-runs", type=int, default=60, help="backend runs per shrink (default 60)")
    _isolation_args(p)
    p.add_argument(
        "--stop-after-failures",
        type=int,
        default=0,
        metavar="K",
        help="end the run after K failed programs (default 0: run them all)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="shard generation, compilation and execution over the Ray cluster at ADDRESS "
        "(no ADDRESS: a new local cluster); needs tile-conformance[ray]",
    )
    return p


def _isolation_args(p: argparse.ArgumentParser) -> None:
    from .pool import DEFAULT_TIMEOUT

    p.add_argument(
        "--jobs", type=int, default=None, help="worker processes running programs (default: 2, or 1 on a single core)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds per program before its worker is killed (default {DEFAULT_TIMEOUT:g})",
    )


def main(argv: Optional[List[str]] = None) -> int:
    """Dispatch `tile conformance ...`; return the exit status (0 = certified / accepted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print("usage:\n" + "\n".join("  " + line for line in USAGE.splitlines()))
        return 0 if argv else 2
    cmd = argv[0]
    try:
        if cmd == "verify":
            return _verify(argv[1:])
        if cmd == "build-bundle":
            return _build_bundle(argv[1:])
        if cmd == "run-bundle":
            return _run_bundle(argv[1:])
        if cmd == "rerun":
            return _rerun(argv[1:])
        return _run(argv)
    except Exception as err:
        from tilecore.diagnostics import TileError

        from .runner import ConformanceError

        if isinstance(err, (ConformanceError, TileError, FileNotFoundError, ValueError)):
            print(f"tile conformance: error: {err}", file=sys.stderr)
            return 2
        raise


def _print_summary(report: dict, paths=()) -> None:
    from rich.console import Console

    console = Console(stderr=False, highlight=False, soft_wrap=True)
    t = report["totals"]
    v = report["verdict"]
    console.print(
        f"[bold]{report['backend']['name']}[/bold] ({report['settings']['tier']} tier, "
        f"{t['programs']} programs, seed {report['settings']['seed']}): {t['pass']} pass, "
        f"{t['fail']} fail, {t['unsupported']} unsupported, {t['suite_error']} suite errors "
        f"in {report['duration_seconds']} s"
    )
    for f in report["failures"]:
        r = f["repro"]
        sus = f" (suspected feature: {r['suspects'][0]})" if r.get("suspects") else ""
        console.print(f"[red]FAIL[/red] {f['family']} #{f['index']}{sus}: {r['message']}")
        if f.get("shrunk"):
            console.print("  minimal program:")
            for line in r["source"].rstrip().splitlines():
                console.print("    " + line, markup=False)
            console.print(f"  inputs seed {r['input_seed']}" + (f", bindings {r['bindings']}" if r["bindings"] else ""))
    for path in paths:
        console.print(f"report: {path}")
    if v["certified"]:
        console.print(f"[bold green]verdict: CERTIFIED ({report['settings']['tier']} tier)[/bold green]")
    else:
        console.print("[bold red]verdict: NOT CERTIFIED[/bold red]")
        for reason in v["reasons"]:
            console.print(f"  - {reason}", markup=False)


def _run(argv: List[str]) -> int:
    from .runner import run_suite

    args = _run_parser().parse_args(argv)
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    options = _options(args.option)
    settings_used = {
        "examples": args.examples,
        "seed": args.seed,
        "tier": args.tier,
        "families": families or "all",
        "options": options,
    }
    if args.ray is not None:
        from functools import partial

        from .ray_shard import run_suite_on_ray

        run_suite = partial(run_suite_on_ray, address=args.ray or None)
    return _finish(
        args.backend,
        settings_used,
        args.report,
        lambda: run_suite(
            args.backend,
            examples=args.examples,
            seed=args.seed,
            tier=args.tier,
            families=families,
            shrink=not args.no_shrink,
            max_shrinks=args.max_shrinks,
            shrink_runs=args.shrink_runs,
            progress=not args.no_progress and sys.stderr.isatty(),
            jobs=args.jobs,
            timeout=args.timeout,
            stop_after_failures=args.stop_after_failures,
            options=options,
        ),
    )[0]


def _options(items: List[str]) -> dict:
    """`--option NAME=VALUE` pairs as a dict (VALUE parsed as JSON, else kept as a string)."""
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            from .runner import ConformanceError

            raise ConformanceError(f"--option needs NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


def _finish(backend: str, settings_used: dict, path: Optional[str], run):
    """Run, then always write the report and print the verdict; (0 only when certified, the report).

    The backend runs in worker processes, so its crashes cannot end this one;
    anything else that stops the run (a bug of the suite, Ctrl-C, a SystemExit
    from a plugin loaded here) still leaves a NOT CERTIFIED report.
    """
    from tilecore.diagnostics import TileError

    from .report import aborted_report, write_report
    from .runner import ConformanceError

    try:
        report = run()
    except (ConformanceError, TileError, FileNotFoundError, ValueError):
        raise  # usage errors: exit status 2, see main()
    except BaseException as err:  # noqa: B902 - the verdict must be written whatever happened
        report = aborted_report(backend, settings_used, err)
    paths = write_report(report, path) if path else ()
    _print_summary(report, paths)
    return (0 if report["verdict"]["certified"] else 1), report


def _rerun(argv: List[str]) -> int:
    from .rerun import rerun_report

    p = argparse.ArgumentParser(
        prog="tile conformance rerun",
        description="Run the failing programs of a report again, exactly (original and "
        "minimal programs, same inputs); with --all, regenerate the whole run from its "
        "seed and check that the program digest is the same.",
    )
    p.add_argument("report", help="a JSON report written by `tile conformance BACKEND --report`")
    p.add_argument("--backend", default=None, help="backend to run on (default: the report's)")
    p.add_argument("--all", action="store_true", help="regenerate and rerun every program of the report")
    p.add_argument("--report", dest="out", default=None, help="write the new report here")
    _isolation_args(p)
    args = p.parse_args(argv)
    with open(args.report) as f:
        old = json.load(f)
    backend = args.backend or old["backend"]["name"]
    code, new = _finish(
        backend,
        dict(old.get("settings", {}), rerun_of=args.report),
        args.out,
        lambda: rerun_report(old, backend, everything=args.all, jobs=args.jobs, timeout=args.timeout),
    )
    if args.all or not new["totals"]["programs"]:
        return code
    t = new["totals"]
    fixed = t["fail"] == 0 and t["suite_error"] == 0
    print(
        f"rerun of the {t['programs']} failing program(s) of {args.report}: "
        + ("all pass now (a rerun is not a certification: run the full suite)" if fixed else f"{t['fail']} still fail")
    )
    return 0 if fixed else 1


def _verify(argv: List[str]) -> int:
    from .report import load_must_pass, verify

    p = argparse.ArgumentParser(prog="tile conformance verify")
    p.add_argument("report", help="a JSON report written by `tile conformance BACKEND --report`")
    p.add_argument("--must-pass", default=None, help="must-pass list (default: the suite's reviewed list)")
    args = p.parse_args(argv)
    with open(args.report) as f:
        report = json.load(f)
    must = load_must_pass(args.must_pass)
    ok, reasons = verify(report, must)
    name = report.get("backend", {}).get("name", "?")
    if ok:
        print(
            f"{args.report}: backend {name} CERTIFIED ({report['settings']['tier']} tier) against must-pass "
            f"list v{must.get('version')} "
            f"({report['totals']['programs']} programs, seed {report['settings']['seed']})"
        )
        return 0
    print(f"{args.report}: backend {name} NOT certified:")
    for r in reasons:
        print(f"  - {r}")
    return 1


def _build_bundle(argv: List[str]) -> int:
    from .bundle import build_bundle
    from .runner import DEFAULT_EXAMPLES

    p = argparse.ArgumentParser(prog="tile conformance build-bundle")
    p.add_argument("backend")
    p.add_argument("dir")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--families", default=None)
    args = p.parse_args(argv)
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    summary = build_bundle(args.backend, args.dir, examples=args.examples, seed=args.seed, families=families)
    print(
        f"bundle {args.dir}: {summary['programs']} programs for backend {args.backend} "
        f"({summary['compiled']} compiled, {summary['compile_failures']} compile failures, "
        f"{summary['unsupported']} unsupported)\nmanifest digest: {summary['manifest_sha256']} "
        f"(run it with: tile conformance run-bundle DIR --expect-digest {summary['manifest_sha256']})"
    )
    return 0 if summary["compile_failures"] == 0 and summary["suite_errors"] == 0 else 1


def _run_bundle(argv: List[str]) -> int:
    from .bundle import run_bundle
    from .report import write_report

    p = argparse.ArgumentParser(prog="tile conformance run-bundle")
    p.add_argument("dir")
    p.add_argument("--backend", default=None, help="backend to load the artifacts with (default: the bundle's)")
    p.add_argument("--report", default=None)
    p.add_argument(
        "--expect-digest",
        required=True,
        help="the manifest digest build-bundle printed: the bundle's native code runs only "
        "when manifest.json still has it",
    )
    args = p.parse_args(argv)
    try:
        report = run_bundle(args.dir, backend_name=args.backend, expect_digest=args.expect_digest)
    except ValueError as err:
        print(f"tile conformance run-bundle: {err}", file=sys.stderr)
        return 2
    paths = write_report(report, args.report) if args.report else ()
    _print_summary(report, paths)
    return 0 if report["verdict"]["certified"] else 1
