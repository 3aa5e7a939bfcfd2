"""int4 on cuda (docs/semantics.md "int4"): the core rewrite hands the backend packed int8 tensors and
int8 tiles, so an int4 GEMM is an int8 tensor-core GEMM after a nibble unpack. The generated code
is accepted by nvcc here; on a GPU host the results match the reference interpreter exactly."""

import numpy as np
import pytest

import tilecore
from tile_cuda import toolchain
from tilecore.testing import assert_matches_reference, gemm_kernel, pack_int4, to_device

needs_compiler = pytest.mark.skipif(
    toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None, reason="no nvcc / NVRTC here"
)


@needs_compiler
def test_int4_gemm_compiles_to_an_int8_tensor_core_gemm():
    # TileLang's gemm_int4 example: A (M, K) and B (N, K) int4, C = A @ B.T in int32
    kernel = tilecore.compile(
        gemm_kernel(128, 128, 128, "int4", "int32", transpose_B=True, block_M=64, block_N=64, block_K=64),
        target="cuda:sm_80",
        out_idx=-1,
    )
    src = kernel.source
    assert "signed char* __restrict__ A_ptr" in src and "signed char* __restrict__ B_ptr" in src
    assert "tc::gemm_ss<" in src and ", signed char, " in src  # the int8 mma path
    assert kernel.artifact.blobs["cubin"][:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("M, N, K", [(256, 256, 256), (200, 136, 90)])
def test_int4_gemm_matches_the_interpreter_on_the_gpu(M, N, K):
    rng = np.random.default_rng(4)
    a = pack_int4(rng.integers(-8, 8, (M, K)))
    b = pack_int4(rng.integers(-8, 8, (N, K)))
    gemm = gemm_kernel(M, N, K, "int4", "int32", transpose_B=True, block_M=128, block_N=128, block_K=64)
    inputs = [to_device(x, "cuda", "torch") for x in (a, b)]
    assert_matches_reference(gemm, inputs, "cuda:sm_90a", out_idx=-1, rtol=0, atol=0)
