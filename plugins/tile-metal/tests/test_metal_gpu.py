"""Execute tier on an Apple GPU (skipped here: Linux). Run on an Apple-silicon Mac with torch's
MPS backend: `pytest plugins/tile-metal/tests -m gpu`."""

import pytest

import tilecore
from tile_metal import plugin

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not plugin.device_present(), reason="no Metal device (needs macOS + torch MPS)"),
]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_simdgroup_gemm_matches_torch(gemm_func, ta, tb):
    import torch

    M, N, K = 128, 128, 64
    k = tilecore.compile(gemm_func(M, N, K, ta=ta, tb=tb, threads=128), target="metal", out_idx=[-1])
    a = torch.randn((K, M) if ta else (M, K), dtype=torch.float16, device="mps")
    b = torch.randn((N, K) if tb else (K, N), dtype=torch.float16, device="mps")
    c = k(a, b)
    ref = (a.T if ta else a).float() @ (b.T if tb else b).float()
    torch.testing.assert_close(c.cpu(), ref.cpu(), rtol=2e-3, atol=2e-2)


def test_while_loops_match_the_reference():
    from tilecore.testing import assert_matches_reference, to_device, while_loops_arguments, while_loops_kernel

    args = [to_device(x, "metal") for x in while_loops_arguments()]  # the kernel takes metal memory
    assert_matches_reference(while_loops_kernel(), args, backend="metal")


def test_per_thread_while_loops_match_the_reference():
    """`while` loops whose trip count differs between threads (feature `parallel_while`)."""
    from tilecore.testing import assert_per_thread_while_matches_reference

    assert_per_thread_while_matches_reference("metal", "metal")  # the kernel takes metal memory
