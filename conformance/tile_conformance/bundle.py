"""Bundles: certify a host that has the device but not the compiler.

`build_bundle` runs on a build host with the backend's toolchain: it generates
the programs a direct run of the same settings checks (the directed ones too,
less the one whose input is a tensor past 2^31 bytes, `BUNDLE_LEAVES_OUT`: the
manifest's summary names it under "left_out"), makes their inputs, computes the reference outputs with the
interpreter, compiles each program for the backend and stores everything in a
folder:

    manifest.json            suite / tilecore / backend versions, settings, one record per program
    programs/0007.py         the program's DSL source (for reading and repro)
    programs/0007.ir.json    its Tile IR (tilecore.ir.serialize), loaded without the frontend
    data/0007.in.npz         the inputs (bfloat16 stored as its uint16 bits, fp8 as uint8)
    data/0007.ref.npz        the reference interpreter's outputs
    artifacts/0007.tileart   the compiled Artifact (tilecore.runtime.cache's checksummed format)
    artifacts/0007.1.tileart the artifact of stage 1, for a program with several T.Kernel stages

`run_bundle` runs on the target host. Running a bundle runs native code made by
whoever built it, so it first checks the manifest's sha256 against the digest
`build-bundle` printed (`expect_digest`, `--expect-digest`; the manifest holds
every artifact's sha256), and refuses otherwise. It then rebuilds each
program's inputs from its seed and recomputes the reference outputs with this
host's interpreter from the program's source (the stored inputs, IR and
outputs are for reading only: a bundle cannot certify results it never
checked), loads each artifact with the backend's `tilecore_launcher` (no code
generation, no compiler), runs it and compares, producing the same report as a
direct run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np

from tilecore.ir.types import FP8_DTYPES

from . import __version__
from .execute import (
    FAIL,
    SUITE_ERROR,
    UNSUPPORTED,
    Outcome,
    call_on_device,
    check_with_core_pipeline,
    compare_outputs,
    declared,
    fresh_compile_cache,
    load_source,
    make_inputs,
    np_dtype,
    program_features,
    reference_outputs,
)
from .programs import build
from .repro import program_from_record, program_record

# 2: directed programs and per-stage artifacts (session 23); 1 (seeded programs only) is still read
BUNDLE_FORMAT = 2
BUNDLE_FORMATS_READ = (1, 2)


def _save_arrays(path: str, arrays: Dict[str, np.ndarray]) -> None:
    by_bits = {np_dtype("bfloat16"): np.uint16} | {np_dtype(d): np.uint8 for d in FP8_DTYPES}
    stored = {k: (a.view(by_bits[a.dtype]) if a.dtype in by_bits else a) for k, a in arrays.items()}
    # compressed: a bundle is carried to the device host (random test data deflates to ~40%)
    np.savez_compressed(path, **stored)  # type: ignore[arg-type]  # numpy's stub types **kwds as flags


def build_bundle(
    backend_name: str, folder: str, examples: int = 100, seed: int = 0, families: Optional[Sequence[str]] = None
) -> dict:
    """Generate, reference-run and compile the programs for `backend_name` into `folder`.

    `backend_name` may be a full target ("cuda:sm_90a") to compile for a specific device.
    """
    with fresh_compile_cache():
        return _build_bundle(backend_name, folder, examples, seed, families)


BUNDLE_LEAVES_OUT = ("offsets",)  # program families a bundle does not carry (their inputs are gigabytes)


def _build_bundle(backend_name, folder, examples, seed, families) -> dict:
    import tilecore
    from tilecore.ir import serialize
    from tilecore.runtime.cache import encode_entry

    from .runner import resolve_backend, run_knobs
    from .strategies import Caps

    backend = resolve_backend(backend_name)
    caps = Caps.from_backend(backend)
    for sub in ("programs", "data", "artifacts"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    records = []
    # counts, then the manifest's digest (a JSON record)
    summary: Dict[str, Any] = {"programs": 0, "compiled": 0, "compile_failures": 0, "unsupported": 0, "suite_errors": 0}
    # the programs a direct run of these settings checks (the directed ones too), less the one whose
    # input is a tensor past 2^31 bytes: a bundle would carry those gigabytes (run it directly)
    every = run_knobs(caps, examples, seed, families)
    bundled = [k for k in every if k.get("family") not in BUNDLE_LEAVES_OUT]
    summary["left_out"] = [
        f"{k['family']} (directed program {k.get('directed')})" for k in every if k.get("family") in BUNDLE_LEAVES_OUT
    ]
    for i, knobs in enumerate(bundled):
        prog = build(knobs)
        pid = f"{i:04d}"
        rec = {"id": pid, "program": program_record(prog), "status": "", "message": ""}
        records.append(rec)
        summary["programs"] += 1
        with open(os.path.join(folder, "programs", pid + ".py"), "w") as f:
            f.write(prog.source)
        try:
            func = load_source(prog.source)
            rec["features"] = program_features(func, prog)
            undeclared = [x for x in rec["features"] if x not in declared(backend)]
            if undeclared:
                rec.update(
                    status=UNSUPPORTED,
                    unsupported=undeclared,
                    message=f"uses undeclared feature(s) {', '.join(undeclared)}",
                )
                summary["unsupported"] += 1
                continue
            check_with_core_pipeline(func)
            arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
            ref = reference_outputs(func, prog, arrays)
        except Exception as err:
            rec.update(status=SUITE_ERROR, message=f"{type(err).__name__}: {err}")
            summary["suite_errors"] += 1
            continue
        with open(os.path.join(folder, "programs", pid + ".ir.json"), "w") as f:
            f.write(serialize.dumps(func))
        _save_arrays(os.path.join(folder, "data", pid + ".in.npz"), {p.name: a for p, a in zip(prog.params, arrays)})
        _save_arrays(
            os.path.join(folder, "data", pid + ".ref.npz"),
            {p.name: a for p, a in zip(prog.params, ref) if p.role in ("out", "inout")},
        )
        try:
            kernel = tilecore.compile(func, target=backend_name)
            # several T.Kernel stages: the whole function's artifact only names them, so each stage's
            # artifact travels too (answered from the compile cache: tilecore.compile just compiled them)
            stage_artifacts = (
                [tilecore.compile(st, target=backend_name).artifact for st in func.split_stages()]
                if func.is_multi_stage
                else []
            )
        except Exception as err:
            rec.update(status="compile_failed", message=f"{type(err).__name__}: {err}")
            summary["compile_failures"] += 1
            continue
        data = encode_entry(pid, kernel.artifact)
        with open(os.path.join(folder, "artifacts", pid + ".tileart"), "wb") as f:
            f.write(data)
        rec.update(status="compiled", target=kernel.target, artifact_sha256=hashlib.sha256(data).hexdigest())
        if func.is_multi_stage:
            stage_digests = []
            for k, stage_artifact in enumerate(stage_artifacts):
                data = encode_entry(f"{pid}.{k}", stage_artifact)
                with open(os.path.join(folder, "artifacts", f"{pid}.{k}.tileart"), "wb") as f:
                    f.write(data)
                stage_digests.append(hashlib.sha256(data).hexdigest())
            rec["stage_artifacts_sha256"] = stage_digests
        summary["compiled"] += 1
    manifest = {
        "format": BUNDLE_FORMAT,
        "suite": {"name": "tile-conformance", "version": __version__},
        "tilecore": {"version": tilecore.__version__, "ir_version": tilecore.TILE_IR_VERSION},
        "backend": {
            "name": backend.name,
            "distribution": backend.distribution,
            "version": backend.version,
            "target": backend_name,
        },
        "settings": {"examples": examples, "seed": seed, "families": list(families) if families else "all"},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summary,
        "programs": records,
    }
    data = json.dumps(manifest, indent=1, sort_keys=True).encode()
    with open(os.path.join(folder, "manifest.json"), "wb") as f:
        f.write(data)
    summary["manifest_sha256"] = hashlib.sha256(data).hexdigest()
    return summary


def _read_artifact(folder: str, name: str, sha256: str):
    """The artifact artifacts/<name>.tileart, refused unless its sha256 is the manifest's."""
    from tilecore.runtime.cache import decode_entry

    with open(os.path.join(folder, "artifacts", name + ".tileart"), "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError("artifact checksum differs from the manifest")
    return decode_entry(data, name)


class BundleDigestError(ValueError):
    """The bundle's manifest is not the one whose digest the caller expects."""


def _read_manifest(folder: str, expect_digest: Optional[str]) -> dict:
    """The manifest, after its sha256 matched `expect_digest` (which is required)."""
    with open(os.path.join(folder, "manifest.json"), "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    if not expect_digest:
        raise BundleDigestError(
            f"{folder}: running a bundle runs native code from whoever built it; pass the manifest "
            f"digest that build-bundle printed (--expect-digest; this bundle's is {digest}) after "
            f"checking it came from a build you trust"
        )
    if digest != expect_digest.strip().lower():
        raise BundleDigestError(
            f"{folder}: manifest.json has sha256 {digest}, not the expected "
            f"{expect_digest}; the bundle was changed or is another build: not run"
        )
    return json.loads(data)


def run_bundle(folder: str, backend_name: Optional[str] = None, expect_digest: Optional[str] = None) -> dict:
    """Check the manifest digest, run the bundle's compiled artifacts on this host and compare
    with reference outputs recomputed here; return the report."""
    from tilecore.plugin.manager import get_plugin_manager
    from tilecore.runtime import stages
    from tilecore.runtime.kernel import Kernel

    from .report import build_report
    from .runner import _feature_table, resolve_backend

    t0 = time.time()
    manifest = _read_manifest(folder, expect_digest)
    if manifest.get("format") not in BUNDLE_FORMATS_READ:
        raise ValueError(f"{folder}: bundle format {manifest.get('format')!r}, this suite reads {BUNDLE_FORMATS_READ}")
    backend = resolve_backend(backend_name or manifest["backend"]["name"])
    pm = get_plugin_manager()
    programs, outcomes = [], []
    for rec in manifest["programs"]:
        prog = program_from_record(rec["program"])
        programs.append(prog)
        feats = rec.get("features", sorted(prog.features))
        status = rec["status"]
        if status == UNSUPPORTED:
            outcomes.append(Outcome(UNSUPPORTED, feats, rec["message"], unsupported=rec.get("unsupported", [])))
            continue
        if status == SUITE_ERROR:
            outcomes.append(Outcome(SUITE_ERROR, feats, rec["message"], error_kind="oracle"))
            continue
        if status != "compiled":
            outcomes.append(
                Outcome(FAIL, feats, "compile failed on the build host: " + rec["message"], error_kind="compile")
            )
            continue
        pid = rec["id"]
        try:
            artifact = _read_artifact(folder, pid, rec["artifact_sha256"])
            stage_artifacts = [
                _read_artifact(folder, f"{pid}.{k}", digest)
                for k, digest in enumerate(rec.get("stage_artifacts_sha256", ()))
            ]
        except Exception as err:
            outcomes.append(
                Outcome(
                    SUITE_ERROR,
                    feats,
                    f"bundle entry {pid} unreadable: {type(err).__name__}: {err}",
                    error_kind="bundle",
                )
            )
            continue
        try:  # the oracle runs here: inputs from the seed, outputs from this host's interpreter
            func = load_source(prog.source)
            arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
            ref = reference_outputs(func, prog, arrays)
        except Exception as err:
            outcomes.append(
                Outcome(
                    SUITE_ERROR,
                    feats,
                    f"reference run of {pid} failed: {type(err).__name__}: {err}",
                    error_kind="oracle",
                )
            )
            continue
        stage_funcs = func.split_stages() if func.is_multi_stage else []
        if len(stage_funcs) != len(stage_artifacts):  # format 1 kept no stage artifacts: rebuild it
            outcomes.append(
                Outcome(
                    SUITE_ERROR,
                    feats,
                    f"bundle entry {pid}: {len(stage_artifacts)} stage artifacts, {len(stage_funcs)} T.Kernel stages",
                    error_kind="bundle",
                )
            )
            continue

        def factory(_artifact=artifact):
            launch = pm.hook.tilecore_launcher(backend=backend, artifact=_artifact)
            if launch is None:
                raise RuntimeError(f"backend {backend.name!r} has no launcher for this artifact here")
            return launch

        target = rec.get("target", backend.name)
        if stage_artifacts:  # several T.Kernel stages: launched in order, as tilecore.compile does
            parts = [
                Kernel(stage, backend, target, art, (), functools.partial(factory, art))
                for stage, art in zip(stage_funcs, stage_artifacts)
            ]
            kernel = Kernel(func, backend, target, artifact, (), stages.stage_launcher(func, parts))
        else:
            kernel = Kernel(func, backend, target, artifact, (), factory)
        t1 = time.perf_counter()
        try:
            got = call_on_device(kernel, arrays, backend.capabilities.memory_space)
        except Exception as err:
            outcomes.append(
                Outcome(
                    FAIL,
                    feats,
                    f"run failed: {type(err).__name__}: {err}",
                    error_kind="run",
                    seconds=time.perf_counter() - t1,
                )
            )
            continue
        outcomes.append(compare_outputs(prog, ref, got, feats))
    table = _feature_table(outcomes, declared(backend))
    from .repro import repro_script
    from .runner import suspects

    failures = []
    for i, (p, o) in enumerate(zip(programs, outcomes)):
        if o.status != FAIL:
            continue
        m = o.mismatch
        failures.append(
            {
                "index": i,
                "family": p.family,
                "kind": o.error_kind,
                "features": o.features,
                "suspects": suspects(o.features, table),
                "message": o.message,
                "mismatch": m.to_json() if m else None,
                "program": program_record(p),
                "shrunk": False,
                "repro": {
                    "source": p.source,
                    "input_seed": p.input_seed,
                    "bindings": p.bindings,
                    "features": o.features,
                    "suspects": suspects(o.features, table),
                    "message": o.message,
                    "max_error": m.max_error if m else None,
                    "where": (
                        {"output": m.output, "index": list(m.index), "expected": m.expected, "got": m.got}
                        if m
                        else None
                    ),
                    "program": program_record(p),
                    "script": repro_script(p, backend.name),
                },
            }
        )
    errors = [
        {"index": i, "family": p.family, "message": o.message, "program": program_record(p)}
        for i, (p, o) in enumerate(zip(programs, outcomes))
        if o.status == SUITE_ERROR
    ]
    settings_used = {
        **manifest["settings"],
        "tier": "execute",
        "bundle": {
            "folder": os.path.abspath(folder),
            "built_with": manifest["backend"],
            "built_by_suite": manifest["suite"]["version"],
            "created": manifest["created"],
            "built_with_tilecore": manifest["tilecore"]["version"],
            "format": manifest["format"],
            # programs a direct run has and this bundle does not (format 1: every directed one)
            "left_out": manifest["summary"].get("left_out", ["the directed programs (bundle format 1)"]),
        },
        "shrink": {"enabled": False, "why": "bundles run without a compiler"},
    }
    digest = hashlib.sha256("".join(p.source + str(p.input_seed) for p in programs).encode()).hexdigest()
    return build_report(backend, settings_used, programs, outcomes, table, failures, errors, digest, time.time() - t0)
