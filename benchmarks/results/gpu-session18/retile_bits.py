"""Where the re-tiled 1000^3 GEMM's bits differ from the user's tiles' (test_retile's one failure on
the H100, session 18): per build, elements off the float64 product by more than fp16 rounding,
and the rows / columns / values of the elements that differ between the two builds."""
import sys

import torch

sys.path.insert(0, "plugins/tile-cuda/tests")
import kernels as KN  # noqa: E402

import tilecore  # noqa: E402
from tile_cuda import plugin  # noqa: E402

be = plugin.make_backend()
for M, N, K in [(1000, 1000, 1000), (1000, 1000, 1024), (1024, 1024, 1000), (1000, 1024, 1024), (1024, 1000, 1024)]:
    f = KN.user_gemm(M, N, K, 128, 128, 32, 3, 128, "float16")
    runs = {}
    for name, opt in (("ours", True), ("own", False)):
        art = tilecore.compile(f, target="cuda:sm_90a", retile_gemm=opt).artifact
        runs[name] = plugin.tilecore_launcher(backend=be, artifact=art)
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = (a.double() @ b.double())
    out = {}
    for name, run in runs.items():
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        run([a, b, c], {})
        torch.cuda.synchronize()
        out[name] = c
        bad = ((c.double() - ref).abs() > 2e-3 * ref.abs() + 2e-2)
        print(M, N, K, name, "nan", int(torch.isnan(c).sum()), "far from fp64", int(bad.sum()))
    diff = out["ours"] != out["own"]
    idx = diff.nonzero()
    print(M, N, K, "differ", int(diff.sum()), "rows", sorted(set(idx[:, 0].tolist()))[:8], "cols", sorted(set(idx[:, 1].tolist()))[:8])
    if len(idx):
        i, j = idx[0].tolist()
        print("   e.g.", i, j, float(out["ours"][i, j]), float(out["own"][i, j]), float(ref[i, j]))
