"""Sustained-load timing of prebuilt GEMM / attention builds next to their peer, with the GPU's power
draw and SM clock over each window (issue 12: one 8192^3 launch under ncu ran at ~0.97x of cuBLAS's
sustained time, the timed loop at ~0.85x; if the card sits at its power limit, the build that
spends more energy per FLOP gets the lower clock).

    python benchmarks/cuda_power.py DIR [SECONDS [GLOB]]   # on the GPU; DIR from cuda_prebuilt.py build

For each problem among the builds (and the peer: cuBLAS / cuDNN SDPA), after the GPU has idled
IDLE_S seconds: the first launch alone ("cold", CUDA events), then back-to-back launches for
SECONDS, their mean time, and nvidia-smi's samples over that window (power W, SM MHz, the active
clock-event reasons). Each build is checked against torch first (relative error < 1e-2). One JSON
line per build; the peer's line has name "peer".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IDLE_S = 2.0
QUERY = "power.draw,clocks.sm,clocks_event_reasons.active"


def sampled(fn, seconds: float) -> dict:
    """Run fn back to back for `seconds`; its mean time per call and the GPU's samples meanwhile."""
    import torch

    smi = subprocess.Popen(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # nvidia-smi's first sample
    calls, start = 0, time.perf_counter()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            fn()
        calls += 10
        if calls % 50 == 0:
            torch.cuda.synchronize()  # keep the queue short, so the window is the GPU's
    e.record()
    e.synchronize()
    smi.terminate()
    out = smi.communicate()[0]
    rows = [line.split(", ") for line in out.strip().splitlines() if line.count(",") == 2]
    power = [float(r[0]) for r in rows[3:]] or [0.0]  # the first samples: the ramp
    clock = [float(r[1]) for r in rows[3:]] or [0.0]
    reasons = sorted({r[2] for r in rows[3:]})
    return {
        "sustained_ms": s.elapsed_time(e) / calls,
        "calls": calls,
        "watts": sum(power) / len(power),
        "sm_mhz": sum(clock) / len(clock),
        "sm_mhz_min": min(clock),
        "reasons": reasons,
    }


def cold(fn) -> float:
    """One launch after the GPU idled IDLE_S seconds (its clock back up), in ms."""
    import torch

    torch.cuda.synchronize()
    time.sleep(IDLE_S)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def main(directory: str, seconds: float = 3.0, pattern: str = "*") -> None:
    import glob
    import pickle

    import torch
    from cuda_prebuilt import problem

    from tile_cuda import plugin

    builds = []
    for path in sorted(glob.glob(os.path.join(directory, pattern + ".pkl"))):
        with open(path, "rb") as f:
            entry, art = pickle.load(f)
        builds.append((entry, plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)))
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "builds": len(builds)}), flush=True)
    key = lambda e: (e["n"], e["dtype"], e["shape"].get("attention", False), e["shape"].get("causal"))  # noqa: E731
    for n, dtype, attention, causal in sorted({key(e) for e, _ in builds}):
        dt = getattr(torch, dtype)
        ins, ref, peer_call, peer_backend, out, flops = problem(n, dt, causal if attention else None)

        def peer(peer_call=peer_call, peer_backend=peer_backend):
            with peer_backend():
                return peer_call()

        peer()
        rows = [("peer", {"n": n, "dtype": dtype, "causal": causal}, peer)]
        for entry, launch in builds:
            if key(entry) != (n, dtype, attention, causal):
                continue
            fn = lambda launch=launch: launch([*ins, out], {})  # noqa: E731
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            if err >= 1e-2:
                print(json.dumps({"name": entry["name"], "n": n, "rel_err": err, "error": "wrong result"}), flush=True)
                continue
            rows.append((entry["name"], {"n": n, "dtype": dtype, "causal": causal, "rel_err": err}, fn))
        for name, row, fn in rows + rows[:1]:  # the peer again last: the card's drift over the group
            row = dict(row, name=name, cold_ms=cold(fn), **sampled(fn, seconds))
            row["tflops"] = flops / row["sustained_ms"] / 1e9
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], float(args[1]) if len(args) > 1 else 3.0, *args[2:])
