"""The conformance report (JSON and Markdown) and its verification against the must-pass list."""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Dict, List, Optional, Tuple

from . import __version__

REPORT_FORMAT = 1


def load_must_pass(path: Optional[str] = None) -> dict:
    """The reviewed must-pass list shipped with the suite (or another file, for tests)."""
    if path is None:
        path = os.path.join(os.path.dirname(__file__), "must_pass.json")
    with open(path) as f:
        return json.load(f)


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def _plugins() -> List[dict]:
    from tilecore.plugin.manager import get_plugin_manager

    pm = get_plugin_manager()
    out = [
        {"name": info.name, "distribution": info.distribution, "version": info.version, "entry_point": info.target}
        for info in pm.plugins.values()
    ]
    out += [
        {
            "name": e.name,
            "distribution": e.distribution,
            "version": e.version,
            "entry_point": e.target,
            "error": e.error,
        }
        for e in pm.errors
    ]
    return sorted(out, key=lambda d: d["name"])


def _device(backend) -> dict:
    try:
        st = backend.toolchain_status()
        return {
            "toolchain_ok": st.ok,
            "summary": st.summary,
            "device": st.device,
            "details": {k: v for k, v in st.details},
        }
    except BaseException as err:  # noqa: B902 - the report must still be written
        return {"toolchain_ok": False, "summary": f"toolchain_status() failed: {type(err).__name__}: {err}"}


def build_report(
    backend,
    settings_used,
    programs,
    outcomes,
    table,
    failures,
    errors,
    digest,
    seconds,
    must_pass: Optional[dict] = None,
    indices=None,
    coverage: Optional[dict] = None,
) -> dict:
    """The report of a run (`indices`: each outcome's program number in the run, when not all ran)."""
    import hypothesis
    import numpy

    import tilecore

    from .execute import declared

    caps = backend.capabilities
    totals = {"programs": len(outcomes)}
    for status in ("pass", "fail", "unsupported", "suite_error"):
        totals[status] = sum(1 for o in outcomes if o.status == status)
    families: Dict[str, Dict[str, int]] = {}
    for p, o in zip(programs, outcomes):
        row = families.setdefault(p.family, {"pass": 0, "fail": 0, "unsupported": 0, "suite_error": 0})
        row[o.status] += 1
    report = {
        "format": REPORT_FORMAT,
        "suite": {"name": "tile-conformance", "version": __version__},
        "tilecore": {
            "distribution": "tilecore",
            "version": tilecore.__version__,
            "ir_version": tilecore.TILE_IR_VERSION,
        },
        "backend": {
            "name": backend.name,
            "distribution": backend.distribution,
            "version": backend.version,
            "targets": list(backend.targets),
            "ir_versions": list(backend.ir_versions),
            "features": sorted(declared(backend)),
            "dtypes": sorted(caps.dtypes),
            "gemm_dtypes": sorted(list(p) for p in caps.gemm_dtypes),
            "tiers": list(caps.tiers),
            "max_shared_memory": caps.max_shared_memory,
            "max_fragment_memory": caps.max_fragment_memory,
            "max_threads": caps.max_threads,
            "warp_size": caps.warp_size,
            "memory_space": caps.memory_space,
        },
        "plugins": _plugins(),
        "device": _device(backend),
        "host": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "numpy": numpy.__version__,
            "hypothesis": hypothesis.__version__,
        },
        "settings": settings_used,
        "program_digest": digest,
        "duration_seconds": round(seconds, 2),
        "totals": totals,
        "families": families,
        "features": table,
        "failures": failures,
        "suite_errors": errors[:20],
    }
    if coverage is not None:
        report["coverage"] = coverage
    ok, reasons = verify(report, must_pass)
    report["verdict"] = {
        "certified": ok,
        "reasons": reasons,
        "must_pass_version": (must_pass or load_must_pass()).get("version"),
    }
    return report


def aborted_report(backend_name: str, settings_used: dict, err: BaseException) -> dict:
    """The report of a run that stopped before it finished: NOT CERTIFIED, with the reason."""
    import traceback

    import hypothesis
    import numpy

    import tilecore

    where = "".join(traceback.format_exception(type(err), err, err.__traceback__)[-3:]).strip()
    reason = f"the run was aborted: {type(err).__name__}({err}) at {where}"
    settings_used = {"examples": 0, "seed": None, "tier": "execute", "families": "all", **settings_used}
    return {
        "format": REPORT_FORMAT,
        "suite": {"name": "tile-conformance", "version": __version__},
        "tilecore": {
            "distribution": "tilecore",
            "version": tilecore.__version__,
            "ir_version": tilecore.TILE_IR_VERSION,
        },
        "backend": {"name": backend_name, "distribution": "", "version": "", "features": []},
        "plugins": [],
        "device": {},
        "host": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "numpy": numpy.__version__,
            "hypothesis": hypothesis.__version__,
        },
        "settings": settings_used,
        "program_digest": "",
        "duration_seconds": 0.0,
        "totals": {"programs": 0, "pass": 0, "fail": 0, "unsupported": 0, "suite_error": 0},
        "families": {},
        "features": {},
        "failures": [],
        "suite_errors": [],
        "verdict": {"certified": False, "reasons": [reason], "must_pass_version": None},
    }


def verify(report: dict, must_pass: Optional[dict] = None) -> Tuple[bool, List[str]]:
    """Check a report against the must-pass list; (certified, reasons it is not)."""
    mp = must_pass or load_must_pass()
    reasons: List[str] = []
    if report.get("format") != REPORT_FORMAT:
        reasons.append(f"report format {report.get('format')!r} is not {REPORT_FORMAT}")
        return False, reasons
    tier = report["settings"]["tier"]
    rules = mp if tier == mp.get("tier", "execute") else {**mp, **mp.get("compile_tier", {})}
    totals = report["totals"]
    if totals["programs"] < rules["min_examples"]:
        reasons.append(f"only {totals['programs']} programs ran; certification needs at least {rules['min_examples']}")
    if totals["fail"]:
        reasons.append(f"{totals['fail']} program(s) failed")
    if totals["suite_error"]:
        reasons.append(f"{totals['suite_error']} program(s) could not be checked (suite errors)")
    declared = set(report["backend"]["features"])
    for feat in mp["features"]:
        row = report["features"].get(feat, {})
        if feat not in declared:
            reasons.append(f"must-pass feature {feat!r} is not declared by the backend")
        elif row.get("fail", 0):
            reasons.append(f"must-pass feature {feat!r} has {row['fail']} failing program(s)")
        elif row.get("pass", 0) < rules["min_passes"]:
            reasons.append(
                f"must-pass feature {feat!r} passed {row.get('pass', 0)} program(s); "
                f"needs {rules['min_passes']} (run more --examples)"
            )
    for feat, row in report["features"].items():
        if row.get("pass", 0) and not row.get("declared", False):
            reasons.append(f"feature {feat!r} counted as passed but the backend does not declare it")
    reasons += _coverage_reasons(report, mp)
    return not reasons, reasons


def _coverage_reasons(report: dict, mp: dict) -> List[str]:
    """Required coverage cells (coverage.py) with fewer passing programs than must_pass.json asks."""
    need = mp.get("coverage", {}).get("min_passes", 0)
    cov = report.get("coverage")
    if not need or not cov:
        return []
    short = [c for c in cov.get("required", []) if cov["cells"].get(c, {}).get("pass", 0) < need]
    if not short:
        return []
    return [
        f"coverage: {len(short)} required cell(s) with fewer than {need} passing program(s): "
        + ", ".join(short[:12])
        + (" ..." if len(short) > 12 else "")
    ]


# ----------------------------------------------------------------------------- Markdown


def to_markdown(report: dict) -> str:
    b, s, t = report["backend"], report["settings"], report["totals"]
    v = report["verdict"]
    lines = [
        f"# tile-conformance report: {b['name']}",
        "",
        f"**Verdict: {'CERTIFIED' if v['certified'] else 'NOT CERTIFIED'} ({s['tier']} tier)**"
        + (" (must-pass list v%s)" % v.get("must_pass_version") if v.get("must_pass_version") else ""),
        "",
    ]
    for r in v["reasons"]:
        lines.append(f"- {r}")
    if v["reasons"]:
        lines.append("")
    dev = report["device"]
    lines += [
        "| | |",
        "|---|---|",
        f"| suite | tile-conformance {report['suite']['version']} |",
        f"| tilecore | {report['tilecore']['version']} (Tile IR {report['tilecore']['ir_version']}) |",
        f"| backend | {b['name']} from {b['distribution']} {b['version']} |",
        f"| device / toolchain | {dev.get('device') or 'none'}; {dev.get('summary', '')} |",
        f"| host | {report['host']['platform']}, {report['host']['cpus']} CPUs, Python {report['host']['python']}, "
        f"hypothesis {report['host']['hypothesis']} |",
        f"| settings | tier {s['tier']}, {s['examples']} examples, seed {s['seed']}, families {s['families']} |",
        f"| compile options | {s.get('options') or 'defaults'}; math accuracy table: "
        f"{s.get('accuracy_table', 'default')} |",
        f"| programs | {t['programs']}: {t['pass']} pass, {t['fail']} fail, {t['unsupported']} unsupported, "
        f"{t['suite_error']} suite errors |",
        f"| program digest | `{report['program_digest'][:16]}` |",
        f"| duration | {report['duration_seconds']} s |",
        "",
        "Plugins loaded: "
        + ", ".join(f"{p['name']} ({p['distribution']} {p['version']})".replace(" ()", "") for p in report["plugins"]),
        "",
        "## Features",
        "",
        "| feature | status | pass | fail | unsupported |",
        "|---|---|---:|---:|---:|",
    ]
    for feat, row in sorted(report["features"].items()):
        lines.append(
            f"| {feat} | {row['status']} | {row['pass']} | {row['fail']} | "
            f"{row['unsupported'] if row['declared'] else 'undeclared'} |"
        )
    lines += [
        "",
        "## Families",
        "",
        "| family | pass | fail | unsupported | suite errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for fam, row in sorted(report["families"].items()):
        lines.append(f"| {fam} | {row['pass']} | {row['fail']} | {row['unsupported']} | {row['suite_error']} |")
    lines += coverage_markdown(report)
    if report["failures"]:
        lines += ["", f"## Failures ({len(report['failures'])})", ""]
        for n, f in enumerate(report["failures"], 1):
            r = f["repro"]
            lines.append(
                f"### {n}. {f['family']} program #{f['index']}: {f['kind']}"
                + (f" — suspected feature: {r['suspects'][0]}" if r.get("suspects") else "")
            )
            lines.append("")
            lines.append(f"- original: {f['message']}")
            if f.get("shrunk"):
                sh = f["shrink"]
                lines.append(
                    f"- shrunk in {sh['runs']} runs ({sh['method']}), size {sh['size_before']} -> "
                    f"{sh['size_after']}: {r['message']}"
                )
            if r.get("where"):
                w = r["where"]
                lines.append(
                    f"- max error {r['max_error']:.6g} at {w['output']}{w['index']}: expected "
                    f"{w['expected']}, got {w['got']}"
                )
            lines.append(
                f"- features: {', '.join(r['features'])}; inputs seed {r['input_seed']}"
                + (f"; bindings {r['bindings']}" if r["bindings"] else "")
            )
            lines += [
                "",
                "Minimal program (save as `repro.py`, run `python repro.py`):",
                "",
                "```python",
                r["script"].rstrip(),
                "```",
                "",
            ]
    if report.get("suite_errors"):
        lines += ["", "## Suite errors", ""]
        for e in report["suite_errors"]:
            lines.append(f"- program #{e['index']} ({e['family']}): {e['message']}")
    return "\n".join(lines) + "\n"


def coverage_markdown(report: dict) -> List[str]:
    """The coverage matrix: every cell the run exercised or needed, with its pass / fail counts."""
    cov = report.get("coverage")
    if not cov:
        return []
    required = set(cov.get("required", []))
    lines = [
        "",
        "## Coverage",
        "",
        "Cells (coverage.py): conversion kinds, integer operators, math functions per "
        "dtype, reduce kinds, edge classes per dtype, dynamic shapes per family, sizes. `required`: "
        "certification needs a passing program there.",
        "",
        "| cell | pass | fail | required |",
        "|---|---:|---:|---|",
    ]
    for cell in sorted(set(cov["cells"]) | required):
        row = cov["cells"].get(cell, {"pass": 0, "fail": 0})
        lines.append(f"| {cell} | {row['pass']} | {row['fail']} | {'yes' if cell in required else ''} |")
    return lines


def write_report(report: dict, path: str) -> Tuple[str, str]:
    """Write `path` (JSON) and the Markdown next to it (same name, .md); return both paths."""
    with open(path, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    md = os.path.splitext(path)[0] + ".md"
    with open(md, "w") as f:
        f.write(to_markdown(report))
    return path, md
