"""The conformance run: generate programs, run them, shrink failures, write the report."""
from __future__ import annotations

import hashlib
import time
from typing import Dict, List, Optional, Sequence

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from .execute import FAIL, PASS, SUITE_ERROR, UNSUPPORTED, Outcome, run_program
from .programs import FAMILIES, Program, Unbuildable, build
from .repro import program_record, repro_script
from .shrink import Shrinker, program_size
from .strategies import Caps, family_requirements, program_knobs

DEFAULT_EXAMPLES = 100


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
        raise ConformanceError(f"unknown or unusable backend {name!r}: {err}"
                               + (f" (installed: {known})" if known else "")) from None
    return backend


def family_quota(families: Sequence[str], examples: int) -> Dict[str, int]:
    """Examples per family: an even split, the remainder to the first families."""
    q = {f: examples // len(families) for f in families}
    for f in list(families)[: examples % len(families)]:
        q[f] += 1
    return q


def generate_knobs(caps: Caps, examples: int, seed: int, families: Optional[Sequence[str]] = None) -> List[dict]:
    """The knobs of `examples` programs, the same for the same (caps, examples, seed, families).

    Each family is drawn by its own hypothesis run (`@seed(seed + i)`, no
    example database, generation phase only), so the programs depend on nothing
    but these arguments and the installed hypothesis version.
    """
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ConformanceError(f"unknown program famil{'y' if len(unknown) == 1 else 'ies'} "
                               f"{', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    fams = [f for f in family_requirements(caps) if families is None or f in families]
    if not fams:
        raise ConformanceError("the backend declares too few features for any program family "
                               f"(needs e.g. 'copy' or 'parallel'; declared: {sorted(caps.features)})")
    quota = family_quota(fams, examples)
    out: List[dict] = []
    for i, fam in enumerate(FAMILIES):
        n = quota.get(fam, 0)
        if not n:
            continue
        drawn: List[dict] = []

        @hypothesis_seed(seed * 1000 + i)
        @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @given(program_knobs(caps, families=(fam,)))
        def collect(knobs):
            drawn.append(knobs)

        collect()
        out.extend(drawn[:n])
    # interleave families so a partial run (and the progress bar) sees all of them
    by_family: Dict[str, List[dict]] = {}
    for k in out:
        by_family.setdefault(k["family"], []).append(k)
    mixed: List[dict] = []
    while any(by_family.values()):
        for fam in list(by_family):
            if by_family[fam]:
                mixed.append(by_family[fam].pop(0))
    return mixed


def _feature_table(outcomes: List[Outcome], declared: frozenset) -> Dict[str, dict]:
    from tilecore.language.features import FEATURES

    table = {f: {"declared": f in declared, "pass": 0, "fail": 0, "unsupported": 0, "suite_error": 0}
             for f in FEATURES}
    for o in outcomes:
        for f in o.features:
            row = table.setdefault(f, {"declared": f in declared, "pass": 0, "fail": 0, "unsupported": 0,
                                       "suite_error": 0})
            if o.status == UNSUPPORTED:
                if f in o.unsupported:
                    row["unsupported"] += 1
            else:
                row[o.status] += 1
    for f, row in table.items():
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

    # near-equal ratios (same tenth) list language features before dtypes: a dtype is the suspect
    # only when it fails clearly more often than the operations it appears in
    ranked = sorted(features, key=lambda f: (-round(ratio(f), 1), f.startswith("dtype:"), -ratio(f), f))
    return [f for f in ranked if ratio(f) > 0]


class _Progress:
    """A rich progress bar on stderr (or nothing)."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                                console=Console(stderr=True), transient=False)
            self.task = self.bar.add_task(label, total=total, status="")
            self.bar.start()

    def advance(self, status: str = ""):
        if self.bar is not None:
            self.bar.update(self.task, advance=1, status=status)

    def describe(self, text: str, total: Optional[int] = None):
        if self.bar is not None:
            self.bar.update(self.task, description=text, **({"total": total, "completed": 0} if total else {}))

    def stop(self):
        if self.bar is not None:
            self.bar.stop()


def run_suite(backend_name: str, examples: int = DEFAULT_EXAMPLES, seed: int = 0, tier: str = "execute",
              families: Optional[Sequence[str]] = None, shrink: bool = True, max_shrinks: int = 4,
              shrink_runs: int = 60, shrink_seconds: float = 90.0, progress: bool = False,
              must_pass: Optional[dict] = None, pool=None) -> dict:
    """Run the suite on one backend and return the report (a JSON-serialisable dict).

    Every program is compiled anew (a private compile cache, see execute.fresh_compile_cache).
    `pool` runs the programs (`run(programs, on_result)`, `run_one(program)`, see InProcessPool);
    default: this process. ray_shard.RayShardPool shards the run over a Ray cluster.
    """
    from .execute import fresh_compile_cache

    with fresh_compile_cache():
        return _run_suite(backend_name, examples, seed, tier, families, shrink, max_shrinks, shrink_runs,
                          shrink_seconds, progress, must_pass, pool)


class InProcessPool:
    """Runs programs one after another in this process (the default of run_suite)."""

    def __init__(self, backend, tier: str):
        self.backend, self.tier = backend, tier

    def run_one(self, program: Program) -> Outcome:
        """The outcome of one program."""
        return run_program(program, self.backend, self.tier)

    def run(self, programs: Sequence[Program], on_result=None) -> List[Outcome]:
        """Outcomes in the programs' order; `on_result(i, outcome)` sees each as it comes."""
        outcomes = []
        for i, program in enumerate(programs):
            outcomes.append(self.run_one(program))
            if on_result is not None:
                on_result(i, outcomes[-1])
        return outcomes


def _run_suite(backend_name, examples, seed, tier, families, shrink, max_shrinks, shrink_runs, shrink_seconds,
               progress, must_pass, pool=None) -> dict:
    from .report import build_report

    t0 = time.time()
    backend = resolve_backend(backend_name)
    tiers = tuple(getattr(backend.capabilities, "tiers", ("execute",)))
    if tier not in ("execute", "compile"):
        raise ConformanceError(f"unknown tier {tier!r}; use execute or compile")
    if tier not in tiers:
        raise ConformanceError(f"backend {backend.name!r} declares the conformance tier(s) {', '.join(tiers)}, "
                               f"not {tier!r} (capabilities.tiers); run with --tier {tiers[0]}")
    caps = Caps.from_backend(backend)
    knob_list = generate_knobs(caps, examples, seed, families)
    programs: List[Program] = [build(k) for k in knob_list]
    digest = hashlib.sha256("".join(p.source + str(p.input_seed) for p in programs).encode()).hexdigest()
    bar = _Progress(progress, len(programs), f"{backend.name} ({tier})")
    counts = {PASS: 0, FAIL: 0, UNSUPPORTED: 0, SUITE_ERROR: 0}
    pool = pool or InProcessPool(backend, tier)

    def on_result(i, o):
        counts[o.status] += 1
        bar.advance(f"pass {counts[PASS]} fail {counts[FAIL]}"
                    + (f" unsupported {counts[UNSUPPORTED]}" if counts[UNSUPPORTED] else "")
                    + (f" errors {counts[SUITE_ERROR]}" if counts[SUITE_ERROR] else ""))

    try:
        outcomes: List[Outcome] = list(pool.run(programs, on_result))
        table = _feature_table(outcomes, frozenset(backend.capabilities.features))
        failures = _failures(programs, outcomes, table, pool, shrink, max_shrinks, shrink_runs,
                             shrink_seconds, seed, bar)
    finally:
        bar.stop()
    errors = [{"index": i, "family": p.family, "message": o.message, "program": program_record(p)}
              for i, (p, o) in enumerate(zip(programs, outcomes)) if o.status == SUITE_ERROR]
    settings_used = {"examples": examples, "seed": seed, "tier": tier, "compile_cache": "fresh (private, per run)",
                     "families": list(families) if families else "all",
                     "shrink": {"enabled": shrink, "max_failures_shrunk": max_shrinks, "max_runs": shrink_runs,
                                "max_seconds": shrink_seconds}}
    return build_report(backend, settings_used, programs, outcomes, table, failures, errors, digest,
                        time.time() - t0, must_pass)


def _failures(programs, outcomes, table, pool, shrink, max_shrinks, shrink_runs, shrink_seconds,
              seed, bar) -> List[dict]:
    failed = [(i, p, o) for i, (p, o) in enumerate(zip(programs, outcomes)) if o.status == FAIL]
    # shrink one failure per distinct (family, kind of failure, most suspicious feature): distinct
    # bugs get a minimal program each; repeats of the same one are listed unshrunk
    to_shrink, seen = [], set()
    for item in failed:
        top = (suspects(item[2].features, table) or [""])[0]
        sig = (item[1].family, item[2].signature(), top)
        if sig not in seen and len(to_shrink) < max_shrinks:
            seen.add(sig)
            to_shrink.append(item[0])
    order = [it for it in failed if it[0] in to_shrink] + [it for it in failed if it[0] not in to_shrink]
    results = []
    if failed:
        bar.describe(f"shrinking {len(to_shrink) if shrink else 0} failure(s)", total=max(1, len(to_shrink)))
    for rank, (i, prog, out) in enumerate(order):
        entry = {
            "index": i, "family": prog.family, "kind": out.error_kind, "features": out.features,
            "suspects": suspects(out.features, table), "message": out.message,
            "mismatch": out.mismatch.to_json() if out.mismatch else None,
            "program": program_record(prog), "shrunk": False,
        }
        minimal_prog, minimal_out = prog, out
        if shrink and i in to_shrink:
            def still_fails(knobs, _sig=out.signature()):
                try:
                    candidate = build(knobs)
                except Unbuildable:
                    return False
                except Exception:
                    return False
                res = pool.run_one(candidate)
                return res.status == FAIL and res.signature() == _sig

            shrinker = Shrinker(still_fails, max_runs=shrink_runs, max_seconds=shrink_seconds, seed=seed)
            knobs = shrinker.shrink(prog.knobs)
            minimal_prog = build(knobs)
            minimal_out = pool.run_one(minimal_prog)
            if minimal_out.status != FAIL:  # cannot happen unless the backend is flaky
                minimal_prog, minimal_out = prog, out
            entry["shrunk"] = True
            entry["shrink"] = {"runs": shrinker.runs, "method": shrinker.method,
                               "size_before": program_size(prog.knobs), "size_after": program_size(minimal_prog.knobs)}
            bar.advance()
        m = minimal_out.mismatch
        entry["repro"] = {
            "source": minimal_prog.source,
            "input_seed": minimal_prog.input_seed,
            "bindings": minimal_prog.bindings,
            "features": minimal_out.features,
            "suspects": suspects(minimal_out.features, table),
            "message": minimal_out.message,
            "max_error": m.max_error if m else None,
            "where": ({"output": m.output, "index": list(m.index), "expected": m.expected, "got": m.got}
                      if m else None),
            "program": program_record(minimal_prog),
            "script": repro_script(minimal_prog, pool.backend.name),
        }
        results.append(entry)
    return results
