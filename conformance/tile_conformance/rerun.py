"""`tile conformance rerun REPORT.json`: the programs of a report, run again exactly.

By default the failing programs (each failure's original and minimal program,
stored in the report with their sources, inputs' seeds and tolerances) run
again on the backend, so a fix is checked on exactly the programs that failed.
With `everything=True` the whole run is regenerated from the report's seed,
families and the backend's capabilities, and the program digest must equal the
report's (a ConformanceError says so when the suite or the backend's
declarations changed).
"""

from __future__ import annotations

from typing import List, Optional

from .programs import Program
from .repro import program_from_record


def failing_programs(report: dict) -> List[Program]:
    """Each failure's original program, then its minimal program when shrinking produced another."""
    out: List[Program] = []
    seen = set()
    for f in report.get("failures", []):
        for record in (f["program"], f.get("repro", {}).get("program")):
            if record and record["source"] + str(record["input_seed"]) not in seen:
                seen.add(record["source"] + str(record["input_seed"]))
                out.append(program_from_record(record))
    return out


def rerun_report(
    report: dict, backend: Optional[str] = None, everything: bool = False, jobs=None, timeout: Optional[float] = None
) -> dict:
    """Run the report's failing programs (or, with `everything`, its whole run) again; a new report."""
    from .pool import DEFAULT_TIMEOUT
    from .runner import ConformanceError, run_suite

    s = report["settings"]
    name = backend or report["backend"]["name"]
    families = None if s.get("families") in (None, "all") else list(s["families"])
    common = dict(
        seed=s.get("seed", 0),
        tier=s.get("tier", "execute"),
        jobs=jobs,
        timeout=timeout or s.get("isolation", {}).get("timeout_seconds", DEFAULT_TIMEOUT),
        shrink=False,
        options=s.get("options") or {},
    )
    if everything:
        new = run_suite(name, examples=s["examples"], families=families, **common)
        if new["program_digest"] != report["program_digest"]:
            raise ConformanceError(
                f"regenerating the run gave other programs (digest {new['program_digest'][:16]} instead of "
                f"{report['program_digest'][:16]}): the suite version or the backend's declared capabilities "
                "changed; rerun without --all to run the report's failing programs as stored"
            )
        return new
    programs = failing_programs(report)
    if not programs:
        raise ConformanceError("the report has no failing programs to run again (use --all to rerun the whole run)")
    return run_suite(name, families=families, programs=programs, **common)
