"""`tile conformance ...` end to end on the reference backend: run, report, verify, bundles."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from tile_conformance.plugin import main
from tile_conformance.report import verify


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ref") / "reference.json")
    assert main(["reference", "--examples", "100", "--seed", "5", "--report", path, "--no-progress"]) == 0
    with open(path) as f:
        return path, json.load(f)


def test_reference_certified_and_report_complete(reference_report):
    path, report = reference_report
    assert report["verdict"]["certified"], report["verdict"]["reasons"]
    # 100 seeded programs, the four directed `forms` programs, the seven `idioms` ones and the directed
    # one past 2^31 bytes (the reference declares the memory)
    assert report["totals"]["programs"] == 112 and report["totals"]["pass"] == 112
    assert report["coverage"]["cells"]["size:>2^31 bytes"]["pass"] == 1
    assert all(report["coverage"]["cells"][f"forms:{f}"]["pass"] >= 1 for f in ("scalar", "view", "stages"))
    assert all(
        report["coverage"]["cells"][f"idioms:{i}"]["pass"] >= 1 for i in ("macro", "split", "memory_order", "simt_for")
    )
    for key in (
        "suite",
        "tilecore",
        "backend",
        "plugins",
        "device",
        "host",
        "settings",
        "features",
        "families",
        "program_digest",
    ):
        assert key in report
    assert report["settings"]["seed"] == 5
    assert report["features"]["gemm"]["pass"] > 0
    md = open(os.path.splitext(path)[0] + ".md").read()
    assert "Verdict: CERTIFIED" in md and "| gemm |" in md


def test_verify_command(reference_report, capsys):
    path, _ = reference_report
    assert main(["verify", path]) == 0
    assert "CERTIFIED" in capsys.readouterr().out


def test_verify_rejects_doctored_reports(reference_report):
    _, report = reference_report
    bad = json.loads(json.dumps(report))
    bad["totals"]["fail"] = 1
    assert not verify(bad)[0]
    bad = json.loads(json.dumps(report))
    bad["backend"]["features"].remove("atomic")  # passed programs for an undeclared feature
    ok, reasons = verify(bad)
    assert not ok and any("atomic" in r for r in reasons)
    bad = json.loads(json.dumps(report))
    bad["features"]["cumsum"]["pass"] = 0
    assert not verify(bad)[0]


def test_same_seed_same_digest(reference_report):
    """The report's digest is that of the programs (seed, examples, capabilities) give, regenerated
    here without running them (test_conformance_reproducible: in other processes too)."""
    from tile_conformance.programs import build
    from tile_conformance.runner import program_digest, resolve_backend, run_knobs
    from tile_conformance.strategies import Caps

    _, report = reference_report
    caps = Caps.from_backend(resolve_backend("reference"))
    assert program_digest([build(k) for k in run_knobs(caps, 100, 5)]) == report["program_digest"]
    assert program_digest([build(k) for k in run_knobs(caps, 100, 6)]) != report["program_digest"]


def test_undeclared_tier_is_a_clear_error(capsys):
    assert main(["reference", "--tier", "compile", "--examples", "3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "declares the conformance tier(s) execute" in err


def test_unknown_backend_is_a_clear_error(capsys):
    assert main(["no-such-backend", "--examples", "3", "--no-progress"]) == 2
    assert "no-such-backend" in capsys.readouterr().err


def _printed_digest(out: str) -> str:
    return out.split("manifest digest: ")[1].split()[0]


def test_bundle_round_trip(tmp_path, capsys):
    folder = str(tmp_path / "bundle")
    assert main(["build-bundle", "reference", folder, "--examples", "21", "--seed", "2"]) == 0
    digest = _printed_digest(capsys.readouterr().out)
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    assert manifest["summary"]["compiled"] == 21
    report_path = str(tmp_path / "bundle.json")
    main(["run-bundle", folder, "--expect-digest", digest, "--report", report_path])
    report = json.load(open(report_path))
    assert report["totals"]["pass"] == 21 and report["settings"]["bundle"]["built_with"]["name"] == "reference"
    # the stored inputs and outputs are deflated (bundles are carried to the device host)
    with zipfile.ZipFile(os.path.join(folder, "data", "0000.in.npz")) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    # a corrupted artifact is caught, never run
    art = os.path.join(folder, "artifacts", "0003.tileart")
    with open(art, "r+b") as f:
        f.seek(40)
        f.write(b"\x00\x01\x02")
    main(["run-bundle", folder, "--expect-digest", digest, "--report", report_path])
    report = json.load(open(report_path))
    assert report["totals"]["suite_error"] == 1 and report["totals"]["pass"] == 20


def test_a_bundle_carries_the_directed_programs_of_a_direct_run(tmp_path, capsys):
    """Session 23: bundles held only the seeded programs, so a bundle certificate never ran the
    directed ones (the `idioms` program that exposed a CUDA indexing fault was one of them)."""
    import hashlib

    from tile_conformance.runner import DIRECTED_FROM, resolve_backend, run_knobs
    from tile_conformance.strategies import Caps

    folder = str(tmp_path / "bundle")
    args = ["--examples", str(DIRECTED_FROM), "--seed", "5", "--families", "copy"]
    assert main(["build-bundle", "reference", folder, *args]) == 0
    digest = _printed_digest(capsys.readouterr().out)
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    every = run_knobs(Caps.from_backend(resolve_backend("reference")), DIRECTED_FROM, 5, ["copy"])
    families = [r["program"]["family"] for r in manifest["programs"]]
    assert {"forms", "idioms"} <= set(families) and "offsets" not in families
    assert len(families) == len(every) - 1 and manifest["summary"]["left_out"] == ["offsets (directed program 11)"]
    report_path = str(tmp_path / "bundle.json")
    main(["run-bundle", folder, "--expect-digest", digest, "--report", report_path])  # one family: no verdict
    report = json.load(open(report_path))
    assert report["totals"]["pass"] == len(families)  # the forms' two-stage programs too
    stages = [r for r in manifest["programs"] if r.get("stage_artifacts_sha256")]
    assert stages and all(len(r["stage_artifacts_sha256"]) == 2 for r in stages)
    assert report["settings"]["bundle"]["left_out"] == ["offsets (directed program 11)"]
    # a stage program without its stage artifacts (as format 1 kept them) is a suite error, never a FAIL
    del stages[0]["stage_artifacts_sha256"]
    open(os.path.join(folder, "manifest.json"), "w").write(json.dumps(manifest, indent=1, sort_keys=True))
    digest = hashlib.sha256(open(os.path.join(folder, "manifest.json"), "rb").read()).hexdigest()
    main(["run-bundle", folder, "--expect-digest", digest, "--report", report_path])
    report = json.load(open(report_path))
    assert report["totals"]["suite_error"] == 1 and report["totals"]["fail"] == 0


def _do_nothing_artifact(artifact):
    """The reference backend's artifact for the same parameters with an empty body."""
    import dataclasses

    from tilecore.ir import serialize

    func = serialize.loads(artifact.meta["ir"])
    meta = dict(artifact.meta, ir=serialize.dumps(dataclasses.replace(func, body=())))
    return dataclasses.replace(artifact, meta=meta)


def test_tampered_bundle_never_certifies(tmp_path, capsys):
    """Issue 16, finding 3: a do-nothing kernel with matching fake reference outputs passed."""
    import hashlib

    import numpy as np

    from tilecore.runtime.cache import decode_entry, encode_entry

    folder = str(tmp_path / "bundle")
    assert main(["build-bundle", "reference", folder, "--examples", "4", "--seed", "3", "--families", "ewise"]) == 0
    digest = _printed_digest(capsys.readouterr().out)
    manifest_path = os.path.join(folder, "manifest.json")
    manifest = json.load(open(manifest_path))
    rec = next(r for r in manifest["programs"] if r["status"] == "compiled")
    pid = rec["id"]
    # without the digest: refused (argparse: --expect-digest is required)
    with pytest.raises(SystemExit):
        main(["run-bundle", folder])
    # the attacker swaps in a kernel that does nothing and stored outputs that agree with it
    art_path = os.path.join(folder, "artifacts", pid + ".tileart")
    artifact = decode_entry(open(art_path, "rb").read(), pid)
    data = encode_entry(pid, _do_nothing_artifact(artifact))
    open(art_path, "wb").write(data)
    ins = dict(np.load(os.path.join(folder, "data", pid + ".in.npz")))
    np.savez(os.path.join(folder, "data", pid + ".ref.npz"), **ins)  # "expected" = untouched outputs
    rec["artifact_sha256"] = hashlib.sha256(data).hexdigest()
    open(manifest_path, "w").write(json.dumps(manifest, indent=1, sort_keys=True))
    report_path = str(tmp_path / "r.json")
    assert main(["run-bundle", folder, "--expect-digest", digest, "--report", report_path]) == 2
    assert "not the expected" in capsys.readouterr().err
    # even a builder who publishes the new digest cannot certify it: references are recomputed here
    new_digest = hashlib.sha256(open(manifest_path, "rb").read()).hexdigest()
    assert main(["run-bundle", folder, "--expect-digest", new_digest, "--report", report_path]) == 1
    report = json.load(open(report_path))
    assert report["totals"]["fail"] >= 1 and not report["verdict"]["certified"]


def test_pytest_plugin_certifies_reference(tmp_path):
    """`pytest --tile-backend reference --pyargs tile_conformance` runs one test per feature."""
    import subprocess
    import sys

    report = tmp_path / "pytest-report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--tile-backend",
            "reference",
            "--tile-report",
            str(report),
            "--pyargs",
            "tile_conformance",
        ],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout and json.loads(report.read_text())["verdict"]["certified"]


def _compile_only_backend():
    from tilecore.plugin.registry import get_registry

    for b in get_registry().backends.values():
        if tuple(b.capabilities.tiers) == ("compile",):
            try:
                if b.toolchain_status().ok:
                    return b.name
            except Exception:
                continue
    return None


@pytest.mark.skipif(_compile_only_backend() is None, reason="no compile-only backend with a working toolchain")
def test_compile_tier_on_a_compile_only_backend():
    """A backend without its device (cuda here: nvcc, no GPU) runs the compile tier, not execute."""
    from tile_conformance.runner import ConformanceError, run_suite

    name = _compile_only_backend()
    report = run_suite(name, examples=7, seed=1, tier="compile", shrink=False)
    assert report["settings"]["tier"] == "compile"
    assert report["totals"]["pass"] + report["totals"]["fail"] + report["totals"]["unsupported"] == 7
    with pytest.raises(ConformanceError, match="tier"):
        run_suite(name, examples=7, seed=1, tier="execute")
