"""One TMA-multicast build of TileLang's quickstart GEMM (4096^3, 128x128x32, 3 stages, 128 threads,
warp-specialized), launched twice for a profiler (session 15: the cluster build ran 6x slower)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "plugins", "tile-cuda", "tests"))
import kernels as K  # noqa: E402
import torch  # noqa: E402

import tilecore  # noqa: E402

n = int(os.environ.get("N", "4096"))
opts = {"warp_specialize": True, "tma_multicast": os.environ.get("MC", "1") == "1"}
kern = tilecore.compile(K.gemm_kernel(n, n, n, bm=128, bn=128, bk=32, stages=3, threads=128, swizzle_panel=8), target="cuda", **opts)
a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
c = torch.empty(n, n, device="cuda", dtype=torch.float16)
for _ in range(2):
    kern(a, b, c)
torch.cuda.synchronize()
if os.environ.get("TIME"):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        kern(a, b, c)
    end.record()
    torch.cuda.synchronize()
    print(f"n {n} multicast {opts['tma_multicast']}: {start.elapsed_time(end) / 20:.3f} ms")
print("clusters", "__cluster_dims__" in kern.artifact.source, "err", ((c.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item())
