"""Execute tier on an AMD GPU (skipped here: this machine has none). Run on a ROCm host with
torch for ROCm installed: `pytest plugins/tile-rocm/tests -m gpu`."""

import pytest

import tilecore
from tile_rocm import toolchain

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not toolchain.device_present(), reason="no AMD GPU / HIP runtime here"),
]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_mfma_gemm_matches_torch(gemm_func, ta, tb):
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None) is None:
        pytest.skip("torch is not the ROCm build")
    M, N, K = 256, 192, 128
    k = tilecore.compile(gemm_func(M, N, K, ta=ta, tb=tb), target="rocm", out_idx=[-1])
    a = torch.randn((K, M) if ta else (M, K), dtype=torch.float16, device="cuda")
    b = torch.randn((N, K) if tb else (K, N), dtype=torch.float16, device="cuda")
    c = k(a, b)
    ref = (a.T if ta else a).float() @ (b.T if tb else b).float()
    torch.testing.assert_close(c, ref, rtol=2e-3, atol=2e-2)


def test_while_loops_match_the_reference():
    from tilecore.testing import assert_matches_reference, to_device, while_loops_arguments, while_loops_kernel

    args = [to_device(x, "rocm") for x in while_loops_arguments()]  # the kernel takes rocm memory
    assert_matches_reference(while_loops_kernel(), args, backend="rocm")


def test_per_thread_while_loops_match_the_reference():
    """`while` loops whose trip count differs between threads (feature `parallel_while`)."""
    from tilecore.testing import assert_per_thread_while_matches_reference

    assert_per_thread_while_matches_reference("rocm", "rocm")  # the kernel takes rocm memory
