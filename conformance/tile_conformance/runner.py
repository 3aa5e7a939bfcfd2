"""The conformance run: generate programs, run them, shrink failures, write the report."""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Dict, List, Optional, Sequence, Tuple

from .execute import FAIL, PASS, SUITE_ERROR, UNSUPPORTED, Outcome, declared
from .pool import DEFAULT_TIMEOUT, ProgramPool, WorkerPool
from .programs import FAMILIES, Program, build
from .repro import program_record, repro_script
from .shrink import Shrinker, program_size
from .strategies import Caps, directed_knobs, family_requirements, knobs_at

DEFAULT_EXAMPLES = 165  # 15 programs of each of the 11 families
# runs of at least this many programs (the certification minimum, must_pass.json) add the directed
# programs (strategies.directed_knobs) after their seeded ones
DIRECTED_FROM = 100


class ConformanceError(Exception):
    """A problem with the run itself (unknown backend, tier not declared, ...)."""


def resolve_backend(name: str):
    """The Backend registered under `name` (a clear error listing the known ones otherwise)."""
    from tilecore.plugin.registry import get_registry

    registry = get_registry()
    try:
        backend, _ = registry.resolve(name)
    except Exception as err:
        known = ", ".join(sorted(registry.backends)) if hasattr(registry, "backends") else ""
        raise ConformanceError(
            f"unknown or unusable backend {name!r}: {err}" + (f" (installed: {known})" if known else "")
        ) from None
    return backend


def family_quota(families: Sequence[str], examples: int) -> Dict[str, int]:
    """Examples per family: an even split, the remainder to the first families."""
    q = {f: examples // len(families) for f in families}
    for f in list(families)[: examples % len(families)]:
        q[f] += 1
    return q


def generate_knobs(caps: Caps, examples: int, seed: int, families: Optional[Sequence[str]] = None) -> List[dict]:
    """The knobs of `examples` programs, the same for the same (caps, examples, seed, families).

    Program i is `knobs_at(caps, seed, i, fams)`: drawn from its own seeded
    Random, so any program of a run can be regenerated alone (a sharded run
    generates only its own indices) and nothing but these arguments and the
    suite version decides it.
    """
    fams = run_families(caps, families)
    return [knobs_at(caps, seed, i, fams) for i in range(examples)]


def run_knobs(caps: Caps, examples: int, seed: int, families: Optional[Sequence[str]] = None) -> List[dict]:
    """The knobs of every program of a run: the seeded ones (generate_knobs), then, in runs of at
    least DIRECTED_FROM programs, the directed ones (strategies.directed_knobs)."""
    knobs = generate_knobs(caps, examples, seed, families)
    if examples >= DIRECTED_FROM:
        knobs += directed_knobs(caps, seed, run_families(caps, families))
    return knobs


def run_families(caps: Caps, families: Optional[Sequence[str]] = None) -> Tuple[str, ...]:
    """The families a run draws from, in their fixed order (a clear error when none or unknown)."""
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ConformanceError(
            f"unknown program famil{'y' if len(unknown) == 1 else 'ies'} "
            f"{', '.join(unknown)}; choose from {', '.join(FAMILIES)}"
        )
    fams = tuple(f for f in family_requirements(caps) if families is None or f in families)
    if not fams:
        raise ConformanceError(
            "the backend declares too few features for any program family "
            f"(needs e.g. 'copy' or 'parallel'; declared: {sorted(caps.features)})"
        )
    return fams


def _feature_table(outcomes: List[Outcome], declared: frozenset) -> Dict[str, dict]:
    from tilecore.language.features import FEATURES

    table: Dict[str, dict] = {
        f: {"declared": f in declared, "pass": 0, "fail": 0, "unsupported": 0, "suite_error": 0} for f in FEATURES
    }
    for o in outcomes:
        for f in o.features:
            row = table.setdefault(
                f, {"declared": f in declared, "pass": 0, "fail": 0, "unsupported": 0, "suite_error": 0}
            )
            if o.status == UNSUPPORTED:
                if f in o.unsupported:
                    row["unsupported"] += 1
            else:
                row[o.status] += 1
    for row in table.values():
        if not row["declared"]:
            row["status"] = "unsupported"
        elif row["fail"]:
            row["status"] = "fail"
        elif row["suite_error"]:
            row["status"] = "error"
        elif row["pass"]:
            row["status"] = "pass"
        else:
            row["status"] = "not exercised"
    return table


def suspects(features: Sequence[str], table: Dict[str, dict]) -> List[str]:
    """The failing program's features, most suspicious first (highest failure ratio in the run)."""

    def ratio(f):
        row = table.get(f, {})
        tried = row.get("pass", 0) + row.get("fail", 0)
        return (row.get("fail", 0) / tried) if tried else 0.0

    # near-equal ratios (same tenth) list language features before dtypes (a dtype is the suspect
    # only when it fails clearly more often than the operations it appears in), then the feature with
    # more failing programs behind it: a feature seen failing once in one program is weaker evidence
    # than one failing in many (a dynamic-shape bug was blamed on the one cumsum program it broke)
    ranked = sorted(
        features,
        key=lambda f: (-round(ratio(f), 1), f.startswith("dtype:"), -table.get(f, {}).get("fail", 0), -ratio(f), f),
    )
    return [f for f in ranked if ratio(f) > 0]


class _Progress:
    """A rich progress bar on stderr (or nothing)."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.task = self.bar.add_task(label, total=total, status="")
            self.bar.start()

    def advance(self, status: str = ""):
        if self.bar is not None:
            self.bar.update(self.task, advance=1, status=status)

    def describe(self, text: str, total: Optional[int] = None):
        if self.bar is not None:
            if total:
                self.bar.update(self.task, description=text, total=total, completed=0)
            else:
                self.bar.update(self.task, description=text)

    def stop(self):
        if self.bar is not None:
            self.bar.stop()


def run_suite(
    backend_name: str,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    tier: str = "execute",
    families: Optional[Sequence[str]] = None,
    shrink: bool = True,
    max_shrinks: int = 4,
    shrink_runs: int = 60,
    shrink_seconds: float = 90.0,
    progress: bool = False,
    must_pass: Optional[dict] = None,
    jobs: Optional[int] = None,
    timeout: float = DEFAULT_TIMEOUT,
    stop_after_failures: int = 0,
    programs: Optional[Sequence[Program]] = None,
    pool: Optional[ProgramPool] = None,
    options: Optional[dict] = None,
) -> dict:
    """Run the suite on one backend and return the report (a JSON-serialisable dict).

    Programs run in `jobs` isolated worker processes (pool.py), each with
    `timeout` seconds; a crash or hang fails that program only. Every program
    is compiled anew (a private compile cache, see execute.fresh_compile_cache).
    `stop_after_failures=K` ends the run after K failed programs (the rest are
    not run: a quick rejection, e.g. for mutation testing). `programs` runs
    those instead of generating (`tile conformance rerun`). `pool`: an open
    WorkerPool to use (and leave open) instead of a new one, e.g. for many
    short runs in a row. `options`: compile options for every program (those
    that declare capabilities, e.g. fast_math, change what is certified).
    """
    from .execute import fresh_compile_cache

    with fresh_compile_cache():
        return _run_suite(
            backend_name,
            examples,
            seed,
            tier,
            families,
            shrink,
            max_shrinks,
            shrink_runs,
            shrink_seconds,
            progress,
            must_pass,
            jobs,
            timeout,
            stop_after_failures,
            programs,
            pool,
            dict(options or {}),
        )


def check_options(backend, options: dict) -> None:
    """A clear error naming the valid ones unless `options` are compile options of `backend`."""
    from tilecore.plugin.options import OptionError, validate_options

    try:
        validate_options(backend.name, backend.options, options)
    except OptionError as err:
        raise ConformanceError(str(err)) from None


def check_tier(backend, tier: str) -> None:
    """A clear error unless `backend` declares conformance tier `tier`."""
    tiers = tuple(getattr(backend.capabilities, "tiers", ("execute",)))
    if tier not in ("execute", "compile"):
        raise ConformanceError(f"unknown tier {tier!r}; use execute or compile")
    if tier not in tiers:
        raise ConformanceError(
            f"backend {backend.name!r} declares the conformance tier(s) {', '.join(tiers)}, "
            f"not {tier!r} (capabilities.tiers); run with --tier {tiers[0]}"
        )


def program_digest(programs: Sequence[Program]) -> str:
    """SHA-256 over every program's source and input seed: equal digests, the same programs."""
    return hashlib.sha256("".join(p.source + str(p.input_seed) for p in programs).encode()).hexdigest()


def _run_suite(
    backend_name,
    examples,
    seed,
    tier,
    families,
    shrink,
    max_shrinks,
    shrink_runs,
    shrink_seconds,
    progress,
    must_pass,
    jobs,
    timeout,
    stop_after_failures,
    given_programs,
    shared_pool,
    options,
) -> dict:
    from .report import build_report

    t0 = time.time()
    backend = resolve_backend(backend_name)
    check_tier(backend, tier)
    check_options(backend, options)
    caps = Caps.from_backend(backend, options)
    directed = given_programs is None and examples >= DIRECTED_FROM
    if given_programs is None:
        programs: List[Program] = [build(k) for k in run_knobs(caps, examples, seed, families)]
    else:
        programs = list(given_programs)
    # directed programs (indices after the seeded ones) start first: each is one cheap program that
    # alone rejects the bug it aims at, so a run stopping at its first failure stops there
    seeded = examples if directed else len(programs)
    order = list(range(seeded, len(programs))) + list(range(seeded))
    digest = program_digest(programs)
    bar = _Progress(progress, len(programs), f"{backend.name} ({tier})")
    counts = {PASS: 0, FAIL: 0, UNSUPPORTED: 0, SUITE_ERROR: 0}

    def on_result(i, o):
        counts[o.status] += 1
        bar.advance(
            f"pass {counts[PASS]} fail {counts[FAIL]}"
            + (f" unsupported {counts[UNSUPPORTED]}" if counts[UNSUPPORTED] else "")
            + (f" errors {counts[SUITE_ERROR]}" if counts[SUITE_ERROR] else "")
        )
        return bool(stop_after_failures) and counts[FAIL] >= stop_after_failures

    pool = shared_pool or WorkerPool(backend.name, tier, jobs, timeout)
    pool.backend, pool.tier = backend.name, tier
    pool.options = options
    try:
        with contextlib.nullcontext(pool) if shared_pool else pool:
            results = pool.run(programs, on_result, order)
            ran = [i for i, o in enumerate(results) if o is not None]
            run_programs = [programs[i] for i in ran]
            outcomes = [o for o in results if o is not None]
            table = _feature_table(outcomes, declared(backend))
            failures = _failures(
                run_programs, outcomes, ran, table, pool, shrink, max_shrinks, shrink_runs, shrink_seconds, seed, bar
            )
    finally:
        bar.stop()
    errors = [
        {"index": i, "family": p.family, "message": o.message, "program": program_record(p)}
        for i, p, o in zip(ran, run_programs, outcomes)
        if o.status == SUITE_ERROR
    ]
    settings_used = {
        "examples": examples if given_programs is None else len(programs),
        "seed": seed,
        "tier": tier,
        "options": options,
        "accuracy_table": "fast_math" if caps.fast_math else "default",
        "compile_cache": "fresh (private, per run)",
        "families": list(families) if families else "all",
        "isolation": {"workers": pool.jobs, "timeout_seconds": pool.timeout},
        "stop_after_failures": stop_after_failures,
        "programs_run": len(ran),
        "shrink": {
            "enabled": shrink,
            "max_failures_shrunk": max_shrinks,
            "max_runs": shrink_runs,
            "max_seconds": shrink_seconds,
        },
    }
    if given_programs is not None:
        settings_used["rerun"] = True
    from .coverage import coverage_table, required_cells

    coverage = {
        "cells": coverage_table(run_programs, outcomes),
        "required": required_cells(caps, run_families(caps, families), directed) if given_programs is None else [],
    }
    return build_report(
        backend,
        settings_used,
        run_programs,
        outcomes,
        table,
        failures,
        errors,
        digest,
        time.time() - t0,
        must_pass,
        indices=ran,
        coverage=coverage,
    )


def _shrink_targets(failed, table, max_shrinks) -> List[int]:
    """One failure per distinct (family, kind of failure, most suspicious feature): distinct bugs get a
    minimal program each; repeats of the same one are listed unshrunk. Timeouts are not shrunk (every
    candidate could take the whole timeout)."""
    to_shrink: List[int] = []
    seen: set = set()
    for pos, prog, out in failed:
        if out.error_kind == "timeout":
            continue
        top = (suspects(out.features, table) or [""])[0]
        sig = (prog.family, out.signature(), top)
        if sig not in seen and len(to_shrink) < max_shrinks:
            seen.add(sig)
            to_shrink.append(pos)
    return to_shrink


def _failures(
    programs, outcomes, indices, table, pool, shrink, max_shrinks, shrink_runs, shrink_seconds, seed, bar
) -> List[dict]:
    failed = [(pos, p, o) for pos, (p, o) in enumerate(zip(programs, outcomes)) if o.status == FAIL]
    to_shrink = _shrink_targets(failed, table, max_shrinks) if shrink else []
    order = [it for it in failed if it[0] in to_shrink] + [it for it in failed if it[0] not in to_shrink]
    results = []
    if failed:
        bar.describe(f"shrinking {len(to_shrink)} failure(s)", total=max(1, len(to_shrink)))
    for pos, prog, out in order:
        entry = {
            "index": indices[pos],
            "family": prog.family,
            "kind": out.error_kind,
            "features": out.features,
            "suspects": suspects(out.features, table),
            "message": out.message,
            "mismatch": out.mismatch.to_json() if out.mismatch else None,
            "program": program_record(prog),
            "shrunk": False,
        }
        minimal_prog, minimal_out = prog, out
        if pos in to_shrink:
            minimal_prog, minimal_out = _shrink_one(entry, prog, out, pool, shrink_runs, shrink_seconds, seed)
            bar.advance()
        entry["repro"] = _repro_entry(minimal_prog, minimal_out, table, pool.backend)
        results.append(entry)
    return results


def _shrink_one(entry, prog, out, pool, shrink_runs, shrink_seconds, seed):
    """Shrink one failure through the worker pool; record how; return (minimal program, its outcome)."""
    signature = out.signature()

    def still_fails(knobs):
        try:
            candidate = build(knobs)
        except Exception:
            return False
        res = pool.run_one(candidate)
        return res.status == FAIL and res.signature() == signature

    shrinker = Shrinker(still_fails, max_runs=shrink_runs, max_seconds=shrink_seconds, seed=seed)
    knobs = shrinker.shrink(prog.knobs)
    minimal_prog = build(knobs)
    minimal_out = pool.run_one(minimal_prog)
    if minimal_out.status != FAIL:  # only when the backend is flaky
        minimal_prog, minimal_out = prog, out
    entry["shrunk"] = True
    entry["shrink"] = {
        "runs": shrinker.runs,
        "method": shrinker.method,
        "seconds": round(shrinker.seconds, 2),
        "size_before": program_size(prog.knobs),
        "size_after": program_size(minimal_prog.knobs),
    }
    return minimal_prog, minimal_out


def _repro_entry(prog, out, table, backend_name) -> dict:
    m = out.mismatch
    return {
        "source": prog.source,
        "input_seed": prog.input_seed,
        "bindings": prog.bindings,
        "features": out.features,
        "suspects": suspects(out.features, table),
        "message": out.message,
        "max_error": m.max_error if m else None,
        "where": ({"output": m.output, "index": list(m.index), "expected": m.expected, "got": m.got} if m else None),
        "program": program_record(prog),
        "script": repro_script(prog, backend_name),
    }
