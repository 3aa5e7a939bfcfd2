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


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_gemm_bf16_and_int8(dtype):
    import torch

    M = N = 256
    Kd = 128
    launch = build(K.gemm_kernel(M, N, Kd, bk=64 if dtype == "int8" else 32, dtype=dtype,
                                 accum="int32" if dtype == "int8" else "float32",
                                 out_dtype="int32" if dtype == "int8" else dtype, tb=dtype == "int8"))
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, Kd), device="cuda", dtype=torch.int8)
        b = torch.randint(-8, 8, (N, Kd), device="cuda", dtype=torch.int8)
        c = torch.zeros((M, N), device="cuda", dtype=torch.int32)
        launch([a, b, c], {})
        ref = (a.cpu().long() @ b.cpu().long().T).int()  # torch has no integer matmul on CUDA
        assert torch.equal(c.cpu(), ref)
    else:
        a = torch.randn(M, Kd, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(Kd, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
        launch([a, b, c], {})
        ref = a.float() @ b.float()
        assert ((c.float() - ref).norm() / ref.norm()) < 1e-2


def test_softmax_group_reduce_fp16_tiles():
    import torch

    launch = build(K.softmax_kernel(64, 2048, threads=256, rows=4, frag_dtype="float16"))
    x = torch.randn(64, 2048, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    launch([x, y], {})
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)
