import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs the backend's GPU (skipped where none is present)")


@pytest.fixture
def gemm_func():
    """A DSL gemm factory: (M, N, K, dtype, accum, transpose_A, transpose_B) -> PrimFunc."""
    import tilecore.language as T

    def make(M=128, N=128, K=64, dtype="float16", accum="float32", ta=False, tb=False, bk=32, threads=256):
        bm = bn = 64

        @T.prim_func
        def main(A: T.Tensor((K, M) if ta else (M, K), dtype), B: T.Tensor((N, K) if tb else (K, N), dtype),
                 C: T.Tensor((M, N), accum)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
                A_s = T.alloc_shared((bk, bm) if ta else (bm, bk), dtype)
                B_s = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
                C_f = T.alloc_fragment((bm, bn), accum)
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    if ta:
                        T.copy(A[k * bk, by * bm], A_s)
                    else:
                        T.copy(A[by * bm, k * bk], A_s)
                    if tb:
                        T.copy(B[bx * bn, k * bk], B_s)
                    else:
                        T.copy(B[k * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, C_f, transpose_A=ta, transpose_B=tb)
                T.copy(C_f, C[by * bm, bx * bn])
        return main
    return make


@pytest.fixture(autouse=True)
def _no_artifact_cache(monkeypatch):
    """Every test runs the real code generator, never a cached artifact."""
    monkeypatch.setenv("TILECORE_CACHE", "0")
