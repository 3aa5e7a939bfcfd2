"""Whole-grid GEMMs re-tiled to the preferred blocks (tile_cuda/retile.py): which kernels, what the
rewrite gives (the reference interpreter's exact sums, for any tiles), the CUDA it compiles to (the
best config's, byte for byte), the option; on a GPU, the same bits as the user's own tiles."""

import dataclasses

import kernels as KN
import numpy as np
import pytest
from gemm_gpu import check_against
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore
from tile_cuda import retile, toolchain
from tilecore import interp
from tilecore.ir import nodes as N
from tilecore.ir.visitor import Transformer, walk_stmts
from tilecore.lowering.whole_gemm import match
from tilecore.passes import bounds
from tilecore.plugin.options import OptionError

needs_compiler = pytest.mark.skipif(
    toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None, reason="no nvcc / NVRTC here"
)
QUICKSTART = dict(bm=128, bn=128, bk=32, stages=3, threads=128)
BEST = retile.PREFERRED["float16"]


def quickstart(n, dtype="float16", **kw):
    cfg = {**QUICKSTART, **kw}
    return KN.user_gemm(n, n, n, cfg["bm"], cfg["bn"], cfg["bk"], cfg["stages"], cfg["threads"], dtype)


def copy_flags(func):
    return [st.predicated for st in walk_stmts(func.body) if isinstance(st, N.Copy)]


def map_stmts(func, fn):
    """`func` with fn applied to the kernel's top-level statements and its loop's."""
    k = func.kernel
    body = tuple(
        dataclasses.replace(st, body=tuple(map(fn, st.body))) if isinstance(st, N.For) else fn(st) for st in k.body
    )
    return dataclasses.replace(func, body=(dataclasses.replace(k, body=body),))


def fragment_a(func):
    """`func` with its A tile in registers (T.alloc_fragment) instead of shared memory."""

    class ToFragment(Transformer):
        def visit_Buffer(self, buf):
            return dataclasses.replace(buf, scope="fragment") if buf.name == "A_s" else buf

    return ToFragment()(func)


def rewrite(func, mode="auto", sm=90, wgmma=True):
    return retile.retile_rewrite(func, sm, wgmma, mode)


# ------------------------------------------------------------------ when (pure Python)


def test_quickstart_at_8192_takes_the_preferred_tiles():
    func, notes = rewrite(quickstart(8192))
    k = func.kernel
    assert [g.value for g in k.grid] == [8192 // BEST.bn, 8192 // BEST.bm] and k.threads == (BEST.threads,)
    loop = next(s for s in k.body if isinstance(s, N.For))
    assert (loop.extent.value, loop.num_stages) == (8192 // BEST.bk, BEST.stages)
    # the tiles divide 8192: no copy is predicated
    assert not any(s.predicated for s in loop.body + k.body if isinstance(s, N.Copy))
    assert notes == [
        "re-tile: the grid is one whole 8192x8192x8192 GEMM; its blocks of 128x128x32, 128 threads, 3 stages "
        "run as 128x256x64, 256 threads, 3 stages (option retile_gemm='auto'; False keeps the kernel's tiles)"
    ]


@pytest.mark.parametrize(
    "func,mode,why",
    [
        (quickstart(2048), "auto", "128 blocks of 128x256 would not fill the 132 SMs"),
        (KN.user_gemm(8192, 8192, 8192, 128, 256, 32, 4, 256), "auto", "not smaller than 128x256"),
        (KN.user_gemm(8192, 8192, 8192, 256, 128, 64, 3, 256), "auto", "not smaller than 128x256"),
        (KN.user_gemm(65536, 64, 4096, 128, 64, 32, 3, 128), "auto", "would pad C much more than the kernel's own"),
        (KN.user_gemm(8192, 8192, 4100, 128, 128, 32, 3, 128), "auto", "A's rows (8200 bytes) are not 16-byte"),
        (quickstart(8192, "float32"), "on", "no preferred tiles for float32"),
        (KN.user_gemm(4096, 4096, 4096, 128, 256, 64, 3, 256), "on", "the kernel's tiles are the preferred ones"),
        (quickstart(8192), "auto-sm80", "the target has no wgmma"),
        (fragment_a(quickstart(8192)), "on", "not both in shared memory"),
    ],
)
def test_kernels_that_keep_their_tiles_say_why(func, mode, why):
    wgmma = mode != "auto-sm80"
    new, notes = rewrite(func, mode.replace("-sm80", ""), 80 if not wgmma else 90, wgmma)
    assert new is func
    assert len(notes) == 1 and notes[0].startswith("re-tile: no: ") and why in notes[0], notes


def test_off_and_other_kernels_are_left_alone_without_a_note():
    func = quickstart(8192)
    assert rewrite(func, "") == (func, [])
    func = KN.gemm_kernel(8192, 8192, 8192, ta=True)  # transposed A: not one whole GEMM of the match
    assert match(func.kernel) is None
    assert rewrite(func, "on") == (func, [])


def test_a_little_more_padding_is_accepted_for_the_preferred_tiles():
    """N = 3968 (31 x 128): 256-wide blocks pad it to 4096, 3% more of C, within PAD_SLACK; N = 3840
    (15 x 256) needs no padding. N = 3712 (29 x 128) would pad to 3840, 3.4% more: accepted too, while
    a 64-wide C padded to 256 is not (test above)."""
    for n, padded in ((3968, 4096), (3840, 3840), (3712, 3840)):
        func, notes = rewrite(KN.user_gemm(8192, n, 4096, 128, 128, 32, 3, 128))
        assert notes and notes[0].startswith("re-tile: the grid"), notes
        assert func.kernel.grid[0].value * BEST.bn == padded


def test_bfloat16_and_ragged_shapes_are_rebuilt_with_predicated_copies():
    func, notes = rewrite(quickstart(4000, "bfloat16"))
    k = func.kernel
    assert notes and "4000x4000x4000" in notes[0]
    assert [g.value for g in k.grid] == [-(-4000 // BEST.bn), -(-4000 // BEST.bm)]
    loop = next(s for s in k.body if isinstance(s, N.For))
    assert loop.extent.value == -(-4000 // BEST.bk)
    assert all(s.predicated for s in loop.body + k.body if isinstance(s, N.Copy))


def test_the_option_is_checked():
    with pytest.raises(OptionError, match="retile_gemm"):
        tilecore.compile(quickstart(256), target="cuda:sm_90a", retile_gemm="always")
    assert retile.retile_mode("auto") == "auto" and retile.retile_mode(True) == "on" and retile.retile_mode(False) == ""


# ------------------------------------------------------------------ what (the reference interpreter)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    M=st.integers(1, 150),
    N_=st.integers(1, 150),
    K=st.integers(1, 100),
    own=st.tuples(st.sampled_from([16, 32, 64]), st.sampled_from([16, 32, 64]), st.sampled_from([16, 32])),
    new=st.tuples(st.sampled_from([32, 64, 128]), st.sampled_from([32, 64, 128, 256]), st.sampled_from([16, 64])),
    rows_first=st.booleans(),
    data=st.data(),
)
def test_any_tiles_give_the_kernels_exact_sums(M, N_, K, own, new, rows_first, data):
    """Small integers: every sum is exact in float32 whatever the blocking, so the rebuilt kernel must
    give the user's kernel's bits (ragged edges: reads past A/B are zeros, writes past C dropped)."""
    func = KN.user_gemm(M, N_, K, *own, 2, 128, dtype="float16")
    if rows_first:  # grid axes the other way round: blockIdx.x walks C's rows
        k = func.kernel
        func = dataclasses.replace(
            func, body=(dataclasses.replace(k, grid=k.grid[::-1], block_vars=k.block_vars[::-1]),)
        )
    found = match(func.kernel)
    assert found is not None
    tiles = retile.Tiles(*new, stages=3, threads=256)
    rebuilt = dataclasses.replace(func, body=(retile.retile(func.kernel, found, tiles),))
    assert match(rebuilt.kernel) is not None  # still one whole GEMM, now of the new tiles
    # a copy is unpredicated only where the bounds analysis proves it in bounds
    predicate_all = lambda st: dataclasses.replace(st, predicated=True) if isinstance(st, N.Copy) else st
    proven, _ = bounds.analyze(map_stmts(rebuilt, predicate_all))
    assert copy_flags(rebuilt) == copy_flags(proven)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N_)).astype(np.float16)
    outs = []
    for f in (func, rebuilt):
        c = np.full((M, N_), np.nan, np.float16)
        interp.run(f, [a, b, c])
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[1], (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16))


# ------------------------------------------------------------------ the CUDA it compiles to


@needs_compiler
def test_rebuilt_quickstart_compiles_to_the_best_configs_source():
    """The quickstart at 8192^3 and issue 12's best config written out by hand (128x256x64, 256
    threads, 3 stages) give the same CUDA but for the kernel's name: one kernel to tune and check."""
    ours = tilecore.compile(quickstart(8192), target="cuda:sm_90a").artifact
    best = tilecore.compile(KN.user_gemm(8192, 8192, 8192, *BEST[:3], BEST.stages, BEST.threads), target="cuda:sm_90a")
    assert ours.meta["threads"] == best.artifact.meta["threads"] and ours.meta["grid_py"] == ["32", "64"]
    assert ours.source == best.artifact.source
    own = tilecore.compile(quickstart(8192), target="cuda:sm_90a", retile_gemm=False).artifact
    assert own.meta["grid_py"] == ["64", "64"] and not any("re-tile" in n for n in own.meta["notes"])


# ------------------------------------------------------------------ on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "M,N_,K,dtype",
    [
        (1000, 1000, 1000, "float16"),
        (512, 768, 320, "bfloat16"),
        (300, 520, 136, "float16"),
        (4096, 4096, 1024, "float16"),
    ],
)
def test_rebuilt_gemm_gives_the_user_tiles_bits(M, N_, K, dtype):
    """The quickstart's tiles (one warpgroup, wgmma over two row blocks) against the preferred ones
    (two consumer warpgroups): both sum each element's k16 steps in ascending order in float32.
    First every element of each build within its rounding of the float64 product (a corrupted
    k-step moves an element far more than the norm-wise check of `check_against` notices), then
    the bits. The user's build has split-K off: at 1000^3 its 64 blocks would otherwise be split
    in four (`split_k.py`), whose partial sums, added in split order, round differently (on the
    H100 in session 18 that build's bits differed from the re-tiled one's, which has 32 blocks of
    16 k-tiles and is not split; the other three shapes matched)."""
    import torch

    from tile_cuda import plugin

    func = KN.user_gemm(M, N_, K, 128, 128, 32, 3, 128, dtype)
    ours = tilecore.compile(func, target="cuda:sm_90a", retile_gemm=True).artifact
    own = tilecore.compile(func, target="cuda:sm_90a", retile_gemm=False, split_k=0).artifact
    assert any(n.startswith("re-tile: the grid") for n in ours.meta["notes"]), ours.meta["notes"]
    assert not any(n.startswith("split-K: ") and "no:" not in n for n in ours.meta["notes"]), ours.meta["notes"]
    tdt = getattr(torch, dtype)
    a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N_, device="cuda", dtype=tdt)
    ref, size = a.double() @ b.double(), a.double().abs() @ b.double().abs()
    ulp = {"float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]  # C's rounding (one ulp, relative)
    bound = ulp * ref.abs() + K * 2.0**-23 * size  # + float32 sums of K products (worst case, doubled)
    for art in (ours, own):
        c = torch.full((M, N_), float("nan"), device="cuda", dtype=tdt)
        plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)([a, b, c], {})
        torch.cuda.synchronize()
        off = (c.double() - ref).abs() > bound
        assert not off.any(), (art.meta["grid_py"], off.nonzero()[:5].tolist(), int(off.sum()))
    check_against(ours, own, M, N_, K, dtype)
