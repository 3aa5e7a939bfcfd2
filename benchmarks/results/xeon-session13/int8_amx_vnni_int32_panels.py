import sys, time, numpy as np, os

sys.path.insert(0, "/work/main/examples")
os.environ.setdefault("TVM_NUM_THREADS", "1")
import tilecore
from gemm import matmul

n = 2048
f = matmul.prim_func(n, n, n, 128, 128, 64, dtype="int8", accum="int32")
import tilecore.language as T

# int32 C: the example's C has the operand dtype; build a variant with int32 C via cpu_gemm_cases
sys.path.insert(0, "/work/main/plugins/tile-cpu/tests")
from cpu_gemm_cases import matmul_rows_first

g = matmul_rows_first(n, n, n, 128, 128, 64, "int8", "int32")
a = np.random.default_rng(0).integers(-100, 100, (n, n)).astype(np.int8)
b = np.random.default_rng(1).integers(-100, 100, (n, n)).astype(np.int8)
want = a.astype(np.int64) @ b.astype(np.int64)
for target in ("cpu", "cpu:icelake-server", "cpu:skylake-avx512"):
    k = tilecore.compile(g, target=target)
    c = np.zeros((n, n), np.int32)
    k(a, b, c)
    assert (c == want).all(), target
    ts = []
    for _ in range(5):
        t = time.process_time()
        k(a, b, c)
        ts.append(time.process_time() - t)
    src = k.artifact.source
    path = "AMX" if "amx_s8" in src else "VNNI" if "vnni_s8" in src else "int32 panels"
    print(target, path, "median ms", round(sorted(ts)[2] * 1e3, 1))
af, bf = a.astype(np.float32), b.astype(np.float32)
ts = []
for _ in range(5):
    t = time.process_time()
    af @ bf
    ts.append(time.process_time() - t)
print("numpy fp32 (same values) median ms", round(sorted(ts)[2] * 1e3, 1))
