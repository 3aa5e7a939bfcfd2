import json, os, sys
import torch
sys.path.insert(0, "benchmarks")
from autotune_h200 import matmul
from cuda_bench import bench, build
import kernels as K
n = 8192
a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
out = {}
for st in (3, 4):
    cfg = dict(block_M=128, block_N=256, block_K=64, num_stages=st, threads=256)
    k = matmul(n, n, n, **cfg)
    prof = k.get_profiler()
    out[f"quick{st}_profiler"] = prof.do_bench()
    out[f"quick{st}_kernelcall_bench"] = bench(lambda: k(a, b))
    art, launch, _ = build(matmul.prim_func(n, n, n, **cfg))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    out[f"quick{st}_launch_bench"] = bench(lambda: launch([a, b, c], {}))
    f2 = K.gemm_kernel(n, n, n, bm=128, bn=256, bk=64, stages=st, threads=256, swizzle_panel=8, predicated=False)
    art2, launch2, _ = build(f2)
    out[f"kgemm{st}_launch_bench"] = bench(lambda: launch2([a, b, c], {}))
    out[f"same_source{st}"] = art.source == art2.source
    open(os.path.join(os.environ["OUT"], f"src_quick{st}.cu"), "w").write(art.source)
    open(os.path.join(os.environ["OUT"], f"src_kgemm{st}.cu"), "w").write(art2.source)
out["cublas_bench"] = bench(lambda: torch.matmul(a, b))
print(json.dumps(out, indent=1))
json.dump(out, open(os.path.join(os.environ["OUT"], "timing_methods.json"), "w"), indent=1)
