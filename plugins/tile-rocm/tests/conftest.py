import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs the backend's GPU (skipped where none is present)")


@pytest.fixture
def gemm_func():
    """A DSL gemm factory: (M, N, K, dtype, accum, transpose_A, transpose_B) -> PrimFunc."""
    from tilecore.testing import gemm_kernel

    def make(M=128, N=128, K=64, dtype="float16", accum="float32", ta=False, tb=False, bk=32, threads=256):
        return gemm_kernel(M, N, K, dtype, accum, ta, tb, block_K=bk, threads=threads)

    return make


@pytest.fixture(autouse=True)
def _no_artifact_cache(monkeypatch):
    """Every test runs the real code generator, never a cached artifact."""
    monkeypatch.setenv("TILECORE_CACHE", "0")
