"""`tile backends [--json] [--verbose]`: installed backends, their toolchains, and plugin load errors."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "backends",
        help="list installed backends, toolchain status and plugin load errors",
        description="List every backend the installed plugins declare: distribution and version, "
        "targets, accepted Tile IR versions, toolchain status and device; and every "
        "plugin that failed to load.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--verbose", "-v", action="store_true", help="also show features, dtypes and load-error tracebacks")
    p.set_defaults(func=run)


def describe_backends() -> Dict[str, Any]:
    """Everything `tile backends` shows, as a JSON-able dict."""
    from .. import TILE_IR_VERSION, __version__
    from ..diagnostics import TileError
    from ..plugin.registry import get_registry, ir_version_accepted

    registry = get_registry()
    try:
        default, origin = registry.default_target_and_origin()
        default_error = ""
    except TileError as err:
        default, origin, default_error = None, "", str(err)
    backends = []
    for name in registry.names():
        b = registry.backends[name]
        try:
            st = b.toolchain_status()
            status = {
                "ok": bool(st.ok),
                "summary": st.summary,
                "details": [[k, v] for k, v in st.details],
                "fix": st.fix,
                "device": st.device,
            }
        except Exception as err:  # a crashing probe is reported, never fatal
            status = {
                "ok": False,
                "summary": f"toolchain_status() raised {type(err).__name__}: {err}",
                "details": [],
                "fix": "",
                "device": None,
            }
        caps = b.capabilities
        backends.append(
            {
                "name": name,
                "distribution": b.distribution,
                "version": b.version,
                "plugin": registry.provider.get(name, ""),
                "description": b.description,
                "targets": list(b.targets),
                "ir_versions": list(b.ir_versions),
                "ir_compatible": ir_version_accepted(b.ir_versions),
                "priority": b.priority,
                "device_present": registry.device_present(b),
                "toolchain": status,
                "memory_space": caps.memory_space,
                "tiers": list(caps.tiers),
                "features": sorted(caps.features),
                "dtypes": sorted(caps.dtypes),
                "tilelang": {
                    "targets": list(b.tilelang.targets),
                    "pass_configs": sorted(b.tilelang.pass_configs.values()),
                    "primitives": list(b.tilelang.primitives),
                },
            }
        )
    return {
        "tilecore_version": __version__,
        "tile_ir_version": TILE_IR_VERSION,
        "default_target": default,
        "default_target_origin": origin,
        "default_target_error": default_error,
        "backends": backends,
        "load_errors": [dict(e.to_dict(), traceback=e.traceback) for e in registry.errors],
    }


def run(args) -> int:
    info = describe_backends()
    if args.json:
        json.dump(info, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    w(f"tilecore {info['tilecore_version']} (Tile IR {info['tile_ir_version']})\n")
    if info["default_target"]:
        w(f"default target: {info['default_target']} ({info['default_target_origin']})\n")
    else:
        w(f"default target: none: {info['default_target_error']}\n")
    if not info["backends"]:
        w("\nno backends installed\n")
    for b in info["backends"]:
        dist = f"{b['distribution']} {b['version']}".strip() or "unknown distribution"
        w(f"\n{b['name']}  ({dist})\n")
        if b["description"]:
            w(f"  {b['description']}\n")
        w(f"  targets:     {', '.join(b['targets'])}\n")
        ir = ", ".join(b["ir_versions"])
        ir_note = "ok" if b["ir_compatible"] else f"INCOMPATIBLE: tilecore produces {info['tile_ir_version']}"
        w(f"  IR versions: {ir} ({ir_note})\n")
        tc = b["toolchain"]
        w(f"  toolchain:   {'ok' if tc['ok'] else 'NOT OK'}: {tc['summary']}\n")
        if tc["fix"]:
            w(f"  fix:         {tc['fix']}\n")
        for key, value in tc["details"]:
            w(f"    {key}: {value}\n")
        device = tc["device"] or ("present" if b["device_present"] else "none present")
        w(f"  device:      {device}\n")
        w(f"  tiers:       {', '.join(b['tiers'])}   memory: {b['memory_space']}\n")
        if args.verbose:
            w(f"  features:    {', '.join(b['features'])}\n")
            w(f"  dtypes:      {', '.join(b['dtypes'])}\n")
            for kind, names in b["tilelang"].items():
                if names:
                    w(f"  TileLang {kind}: {', '.join(names)}\n")
    if info["load_errors"]:
        w("\nplugins that failed to load:\n")
        for e in info["load_errors"]:
            dist = f"{e['distribution']} {e['version']}".strip()
            where = ", ".join(part for part in (dist, e["entry_point"]) if part)
            w(f"  {e['name']}{f' ({where})' if where else ''}: {e['error']}\n")
            if args.verbose and e["traceback"]:
                w("    " + e["traceback"].rstrip().replace("\n", "\n    ") + "\n")
    return 0
