"""Execute tier on a GPU host (skipped where no NVIDIA GPU is present)."""
import numpy as np
import pytest

import kernels as K
from tilecore.plugin.backend import TileModule
from tile_cuda import plugin

pytestmark = pytest.mark.gpu


def build(func, target="cuda"):
    be = plugin.make_backend()
    art = plugin.tilecore_codegen(backend=be, module=TileModule(func, target), options={})
    return plugin.tilecore_launcher(backend=be, artifact=art)


@pytest.mark.parametrize("M,N,Kd,pred", [(512, 512, 256, False), (200, 136, 72, True)])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_matches_torch(M, N, Kd, pred, ta, tb):
    import torch

    launch = build(K.gemm_kernel(M, N, Kd, ta=ta, tb=tb, predicated=pred))
    a = torch.randn((Kd, M) if ta else (M, Kd), device="cuda", dtype=torch.float16)
    b = torch.randn((N, Kd) if tb else (Kd, N), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    launch([a, b, c], {})
    ref = (a.T if ta else a).float() @ (b.T if tb else b).float()
    err = (c.float() - ref).norm() / ref.norm()
    assert err < 1e-3, err


def test_elementwise_dynamic_partial_tile():
    import torch

    launch = build(K.elementwise_kernel(0, dynamic=True))
    x = torch.randn(5000, device="cuda")
    y = torch.full_like(x, float("nan"))
    launch([x, y], {"n": 5000})
    torch.testing.assert_close(y, 2 * x + 1)


def test_softmax_matches_torch():
    import torch

    launch = build(K.softmax_kernel(64, 1024))
    x = torch.randn(64, 1024, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    launch([x, y], {})
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)
