"""Session 18's last GPU checks, built here and run on the GPU host without TVM (as
benchmarks/cuda_prebuilt.py): the `while` kernels against the reference interpreter (the
kernel with a global `while` test hung on the H100 before its pointers lost __restrict__), and
where the re-tiled 1000^3 GEMM's bits differ from the user's tiles' (test_retile's one failure).

    python benchmarks/results/gpu-session18/prebuilt_checks.py build DIR   # here
    python benchmarks/results/gpu-session18/prebuilt_checks.py run DIR     # on the GPU, PYTHONPATH=.:plugins/tile-cuda
"""

import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "plugins", "tile-cuda", "tests"))
SHAPES = [(1000, 1000, 1000), (1000, 1000, 1024), (1024, 1024, 1000), (1000, 1024, 1024), (1024, 1000, 1024)]


def build(out):
    import kernels as KN

    import tilecore
    from tilecore.testing import per_thread_while_kernel, while_loops_kernel

    os.makedirs(out, exist_ok=True)
    arts = {
        "while": tilecore.compile(while_loops_kernel(), target="cuda:sm_90a").artifact,
        "per_thread_while": tilecore.compile(per_thread_while_kernel(), target="cuda:sm_90a").artifact,
    }
    for M, N, K in SHAPES:
        f = KN.user_gemm(M, N, K, 128, 128, 32, 3, 128, "float16")
        for name, opt in (("ours", True), ("own", False)):
            arts[f"gemm_{M}_{N}_{K}_{name}"] = tilecore.compile(f, target="cuda:sm_90a", retile_gemm=opt).artifact
    with open(os.path.join(out, "checks.pkl"), "wb") as fh:
        pickle.dump(arts, fh)
    print(len(arts), "builds")


def run(out):
    import numpy as np
    import torch

    from tile_cuda import plugin
    from tilecore import interp
    from tilecore.testing import (
        per_thread_while_arguments,
        per_thread_while_kernel,
        while_loops_arguments,
        while_loops_kernel,
    )

    with open(os.path.join(out, "checks.pkl"), "rb") as fh:
        arts = pickle.load(fh)
    be = plugin.make_backend()
    launch = {k: plugin.tilecore_launcher(backend=be, artifact=a) for k, a in arts.items()}
    print("gpu", torch.cuda.get_device_name(0), flush=True)
    for name, func, args in (
        ("while", while_loops_kernel(), while_loops_arguments()),
        ("per_thread_while", per_thread_while_kernel(), per_thread_while_arguments()),
    ):
        want = [a.copy() for a in args]
        interp.run(func, want)
        dev = [torch.from_numpy(a.copy()).cuda() for a in args]
        launch[name](dev, {})
        torch.cuda.synchronize()
        got = [d.cpu().numpy() for d in dev]
        same = [bool(np.allclose(g, w, rtol=1e-5, atol=1e-5)) for g, w in zip(got, want)]
        print(name, "matches the reference per argument:", same, flush=True)
    for M, N, K in SHAPES:
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        ref = a.double() @ b.double()
        outs = {}
        for tag in ("ours", "own"):
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            launch[f"gemm_{M}_{N}_{K}_{tag}"]([a, b, c], {})
            torch.cuda.synchronize()
            outs[tag] = c
            far = ((c.double() - ref).abs() > 2e-3 * ref.abs() + 2e-2).sum().item()
            print(M, N, K, tag, "nan", int(torch.isnan(c).sum()), "far from fp64", int(far), flush=True)
        diff = (outs["ours"] != outs["own"]).nonzero()
        rows, cols = sorted(set(diff[:, 0].tolist())), sorted(set(diff[:, 1].tolist()))
        print(M, N, K, "differ", len(diff), "rows", rows[:6], len(rows), "cols", cols[:6], len(cols), flush=True)
        if len(diff):
            i, j = diff[0].tolist()
            vals = (float(outs["ours"][i, j]), float(outs["own"][i, j]), float(ref[i, j]))
            print("   e.g.", i, j, "ours / own / fp64", vals, flush=True)


if __name__ == "__main__":
    {"build": build, "run": run}[sys.argv[1]](sys.argv[2])
