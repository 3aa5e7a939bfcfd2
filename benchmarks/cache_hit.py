"""Cache-hit start-up time: `python benchmarks/cache_hit.py [--tree DIR ...] [--runs N]`.

A serving process that starts, compiles a kernel that is already in the on-disk
cache and calls it once pays for: importing tilecore, discovering plugins,
computing the cache key, reading and verifying the entry (and, on cpu, the shared
library) and loading the compiled code. This script measures exactly that, in
fresh processes, for the cpu and npu backends: each run is a new Python process
with a warm cache (filled by one untimed process first) whose own timer covers
`import tilecore` through the first call's result (wall clock, and the process's
CPU time, which a machine shared with other jobs disturbs much less), and which
checks the result against numpy.

`--tree DIR` (repeatable) runs the same measurement with DIR's tilecore and
plugins first on PYTHONPATH, so two source trees (e.g. before and after a
change, `git archive <commit> | tar -x -C DIR`) are measured side by side in one
run, runs interleaved. Reported: median and best seconds per tree and backend.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, time, sys
start = time.perf_counter()
start_cpu = time.process_time()
import numpy as np
import tilecore
import tilecore.language as T

@T.prim_func
def scale_add(A: T.Tensor((256, 64), "float32"), B: T.Tensor((256, 64), "float32"),
              C: T.Tensor((256, 64), "float32")):
    with T.Kernel(4) as bx:
        for i, j in T.Parallel(64, 64):
            C[bx * 64 + i, j] = A[bx * 64 + i, j] * 2.0 + B[bx * 64 + i, j]

imported = time.perf_counter()
kernel = tilecore.compile(scale_add, target=sys.argv[1], out_idx=[-1])
compiled = time.perf_counter()
rng = np.random.default_rng(0)
a = rng.standard_normal((256, 64)).astype("float32")
b = rng.standard_normal((256, 64)).astype("float32")
c = kernel(a, b)
done = time.perf_counter()
done_cpu = time.process_time()
assert np.allclose(c, a * 2 + b, rtol=1e-6), "wrong result"
print(json.dumps({"import": imported - start, "compile": compiled - imported,
                  "first_call": done - compiled, "total": done - start, "cpu": done_cpu - start_cpu}))
"""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = ("tile-cpu", "tile-cuda", "tile-rocm", "tile-metal", "tile-npu")


def _env(tree: str, cache: str) -> dict:
    env = dict(os.environ)
    paths = [tree] + [os.path.join(tree, "plugins", p) for p in PLUGINS] + [os.path.join(tree, "conformance")]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TILECORE_CACHE_DIR"] = cache
    env.pop("TILECORE_CACHE", None)
    return env


def _run(tree: str, cache: str, backend: str, script: str) -> dict:
    out = subprocess.run([sys.executable, script, backend], env=_env(tree, cache), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{tree} {backend}: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", help="source tree to measure (default: this one)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--backend", action="append", help="backends (default: cpu, npu)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    backends = args.backend or ["cpu", "npu"]
    caches = {tree: tempfile.mkdtemp(prefix="tc-bench-cache-") for tree in trees}
    script = os.path.join(tempfile.mkdtemp(prefix="tc-bench-"), "child.py")  # the frontend reads the file
    with open(script, "w") as f:
        f.write(CHILD)
    samples = {(t, b): [] for t in trees for b in backends}
    try:
        for tree in trees:
            for backend in backends:
                _run(tree, caches[tree], backend, script)  # fills the cache (cold compile, untimed)
        for _ in range(args.runs):
            for tree in trees:  # interleaved, so drift in machine load hits every tree alike
                for backend in backends:
                    samples[(tree, backend)].append(_run(tree, caches[tree], backend, script))
    finally:
        for folder in list(caches.values()) + [os.path.dirname(script)]:
            shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for (tree, backend), runs in samples.items():
        total = [r["total"] for r in runs]
        compile_s = [r["compile"] for r in runs]
        rows.append(
            {
                "tree": tree,
                "backend": backend,
                "runs": len(runs),
                "total_median_s": statistics.median(total),
                "total_best_s": min(total),
                "compile_median_s": statistics.median(compile_s),
                "import_median_s": statistics.median(r["import"] for r in runs),
                "first_call_median_s": statistics.median(r["first_call"] for r in runs),
                "cpu_time_median_s": statistics.median(r["cpu"] for r in runs),
                "cpu_time_best_s": min(r["cpu"] for r in runs),
            }
        )
        print(
            f"{backend:4s} {tree}: total median {rows[-1]['total_median_s'] * 1e3:.1f} ms "
            f"(best {rows[-1]['total_best_s'] * 1e3:.1f}), compile (cache hit) median "
            f"{rows[-1]['compile_median_s'] * 1e3:.1f} ms, first call "
            f"{rows[-1]['first_call_median_s'] * 1e3:.1f} ms; process CPU time median "
            f"{rows[-1]['cpu_time_median_s'] * 1e3:.1f} ms (best {rows[-1]['cpu_time_best_s'] * 1e3:.1f})"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "machine": platform.platform(),
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "command": " ".join(sys.argv),
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "results": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
