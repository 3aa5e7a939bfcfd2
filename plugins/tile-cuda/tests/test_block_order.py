"""The L2-friendly block order of gemm kernels (TargetDescription.gemm_block_panel, option
gemm_block_panel): compile tier here, execute tier on a GPU."""

import kernels as K
import numpy as np
import pytest
from cuda_source import cuda_source

from tile_cuda import plugin, toolchain
from tile_cuda.target import GEMM_BLOCK_PANEL, HEAVY_FIRST_GROUP_BLOCKS, cuda_target
from tilecore.ir import nodes as N
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")


def _source(func, options=None, target="cuda:sm_90a"):
    return cuda_source(func, toolchain.parse_target(target), **(options or {}))


def _gemm(**kw):
    return K.gemm_kernel(1000, 600, 256, bm=64, bn=64, bk=32, stages=2, threads=128, predicated=True, **kw)


@needs_nvcc
def test_gemm_kernels_take_the_panel_order_by_default():
    """No T.use_swizzle: a gemm kernel is lowered exactly as with T.use_swizzle(GEMM_BLOCK_PANEL);
    option gemm_block_panel=0 or T.use_swizzle(enable=False) keeps the launch order."""
    default = _source(_gemm())
    assert default == _source(_gemm(swizzle_panel=GEMM_BLOCK_PANEL))
    launch_order = _source(_gemm(), {"gemm_block_panel": 0})
    assert launch_order != default
    func = _gemm()
    kern = func.body[0]
    off = N.Hint("use_swizzle", (), (("panel_size", 8), ("enable", False)))
    disabled = N.PrimFunc(
        func.name, func.params, (N.Kernel(kern.grid, kern.block_vars, kern.threads, (off,) + kern.body),)
    )
    assert _source(disabled) == launch_order
    assert _source(_gemm(), {"gemm_block_panel": 4}) == _source(_gemm(swizzle_panel=4))


@needs_nvcc
def test_kernels_without_a_gemm_keep_the_launch_order():
    func = K.softmax_kernel(64, 256, threads=128)
    assert _source(func) == _source(func, {"gemm_block_panel": 0})


@pytest.mark.parametrize(
    "option,default", [("gemm_block_panel", GEMM_BLOCK_PANEL), ("heavy_first_group_blocks", HEAVY_FIRST_GROUP_BLOCKS)]
)
def test_block_order_options_are_checked(option, default):
    assert getattr(cuda_target("sm_90a", {}), option) == default
    assert getattr(cuda_target("sm_80", {option: 0}), option) == 0
    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match=f"compile option {option} must be an int >= 0"):
            cuda_target("sm_90a", {option: bad})


@pytest.mark.gpu
@pytest.mark.parametrize("panel", [0, 3, 8])
def test_gemm_in_panel_order_matches_torch(panel):
    """A 16 x 10 grid of blocks with partial edge tiles: panels of 3 and 8 block rows (16 is not a
    multiple of either) visit every block exactly once."""
    import torch

    func = K.gemm_kernel(
        1000,
        600,
        256,
        bm=64,
        bn=64,
        bk=32,
        stages=2,
        threads=128,
        predicated=True,
        accum="float32",
        out_dtype="float32",
    )
    be = plugin.make_backend()
    art = plugin.tilecore_codegen(backend=be, module=TileModule(func, "cuda"), options={"gemm_block_panel": panel})
    launch = plugin.tilecore_launcher(backend=be, artifact=art)
    a = torch.randn(1000, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 600, device="cuda", dtype=torch.float16)
    c = torch.full((1000, 600), float("nan"), device="cuda", dtype=torch.float32)
    launch([a, b, c], {})
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert np.isfinite(err) and err < 1e-5, err


def test_cuda_options_are_declared_for_compile():
    """tilecore.compile(..., wgmma_overlap=..., gemm_block_panel=...) reach the codegen, checked."""
    from tilecore.plugin.options import OptionError, validate_options

    declared = plugin.make_backend().options
    opts = validate_options("cuda", declared, {"wgmma_overlap": False, "gemm_block_panel": 0})
    assert opts["wgmma_overlap"] is False and opts["gemm_block_panel"] == 0
    defaults = validate_options("cuda", declared, {})
    assert defaults["wgmma_overlap"] == "release" and defaults["gemm_block_panel"] == GEMM_BLOCK_PANEL
    with pytest.raises(OptionError, match="wgmma_overlap"):
        validate_options("cuda", declared, {"wgmma_overlap": "fast"})
    with pytest.raises(OptionError, match="gemm_block_panel"):
        validate_options("cuda", declared, {"gemm_block_panel": "8"})


@needs_nvcc
def test_three_dimensional_grids_keep_the_launch_order():
    """Attention's grid (query blocks, heads, batch) reads K and V per head in launch order
    already; the default panel order applies to 2-D grids only."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    import flash_attention as fa

    func = fa.flashattn.prim_func(1, 2, 256, 64, False, block_M=64, block_N=64, num_stages=2)
    assert len(func.body[0].grid) == 3
    assert _source(func) == _source(func, {"gemm_block_panel": 0})
