import json, os, statistics, sys
import torch
sys.path.insert(0, "benchmarks")
from autotune_h200 import matmul
from cuda_bench import bench, bench_back_to_back
from tile_cuda.timing import CudaEventTimer
n = 8192
a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
k = matmul(n, n, n, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
run = lambda: k(a, b)
r = {}
t = CudaEventTimer()
r["profiler_flush_median"] = statistics.median(t.measure(run, 10, 60)) * 1e3
t2 = CudaEventTimer(); t2._flush = torch.empty(1, dtype=torch.int32, device="cuda")
r["profiler_noflush_median"] = statistics.median(t2.measure(run, 10, 60)) * 1e3
r["back_to_back_5"] = bench_back_to_back(run, reps=5)
r["back_to_back_60"] = bench_back_to_back(run, reps=60)
r["sync_each"] = bench(run)
r["cublas_back_to_back_60"] = bench_back_to_back(lambda: torch.matmul(a, b), reps=60)
r["cublas_sync_each"] = bench(lambda: torch.matmul(a, b))
t3 = CudaEventTimer()
r["cublas_profiler_flush"] = statistics.median(t3.measure(lambda: torch.matmul(a, b), 10, 60)) * 1e3
print(json.dumps(r, indent=1))
json.dump(r, open(os.path.join(os.environ["OUT"], "profiler_methods.json"), "w"), indent=1)
