"""Warp-specialized pipelines (tile_cuda/warp_specialize.py, option warp_specialize): which loops
qualify (planning, pure Python), what the generated code does (compile tier), and results on a GPU."""

import re

import kernels as K
import numpy as np
import pytest
from examples_util import example

import tilecore
import tilecore.language as T
from tile_cuda import plugin, toolchain
from tile_cuda.rules import cuda_plan
from tile_cuda.warp_specialize import WarpSpecializedPipeline, register_split
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
WS = {"warp_specialize": True}


def _attention(causal, block_M=128, block_N=128, stages=2, seq_len=512):
    return example("flash_attention").flashattn.prim_func(
        1, 2, seq_len, 128, causal, block_M=block_M, block_N=block_N, num_stages=stages
    )


def _claim(func, options):
    claims = cuda_plan(func, "sm_90a", options).claims.get(WarpSpecializedPipeline.name, {})
    return next(iter(claims.values()), None)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_is_warp_specialized_with_gemms_taking_turns(causal):
    """Two warpgroups and two gemms: ping-pong; the causal trip count (a name bound to block
    indices before the loop) is recomputed by the producer."""
    info = _claim(_attention(causal), WS)
    assert info is not None and info.pingpong and info.stages == 2
    assert [c.dst.buffer.name for c in info.copies] == ["K_shared", "V_shared"]
    assert [let.var.name for let in info.lets] == (["loop_range"] if causal else [])


def test_one_warpgroup_and_plain_gemms_are_specialized_without_turns():
    assert not _claim(_attention(False, block_M=64, block_N=64), WS).pingpong  # 128 threads
    assert not _claim(K.gemm_kernel(1024, 1024, 1024, bm=128, bn=256, bk=64, stages=3, threads=256), WS).pingpong


def test_option_off_and_other_targets_keep_the_async_copy_pipeline():
    assert _claim(_attention(False), {"warp_specialize": False}) is None
    assert _claim(_attention(False), {}) is not None  # by default for two warpgroups
    assert _claim(_attention(False, block_M=64, block_N=64), {}) is None  # one warpgroup: only when asked
    claims = cuda_plan(_attention(False), "sm_80", WS).claims
    assert not claims.get(WarpSpecializedPipeline.name)


def _gemm_writing_shared_in_the_loop():
    @T.prim_func
    def main(
        A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"), C: T.Tensor((256, 256), "float16")
    ):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C_s)  # a shared write in the body: the consumers would need a barrier
            T.copy(C_s, C[by * 128, bx * 128])

    return main


def test_a_body_that_needs_a_barrier_is_not_specialized():
    assert _claim(_gemm_writing_shared_in_the_loop(), WS) is None


def test_register_split_fits_the_register_file():
    consumer, launch = register_split(256)
    assert (consumer, launch) == (232, 168)
    assert 256 * consumer + 128 * 40 <= 65536
    consumer, launch = register_split(128)
    assert consumer <= launch  # one warpgroup already has all it can use: no setmaxnreg


def test_register_split_for_two_blocks_per_sm():
    """Two 256-thread blocks (a 128-thread consumer + the producer) share the register file."""
    consumer, launch = register_split(128, 2)
    assert (consumer, launch) == (216, 128)
    assert 2 * (128 * consumer + 128 * 40) <= 65536


def _source(func, options):
    be = plugin.make_backend()
    art = plugin.tilecore_codegen(backend=be, module=TileModule(func, "cuda:sm_90a"), options=options)
    return art


@needs_nvcc
def test_attention_source_has_the_producer_and_the_turns():
    """One codegen: 384 threads (T + the producer warpgroup), registers handed over, stage
    mbarriers filled by TMA, named barriers instead of __syncthreads in the consumer part, gemms issued with one
    group in flight and retired after the turn is passed, row maxima as max.NaN."""
    art = _source(_attention(True), WS)
    src = art.source
    assert art.meta["threads"] == 384 and "__launch_bounds__(384)" in src
    for needle in (
        "tc::regs_increase<232>",
        "tc::regs_decrease<40>",
        "tc::mbar_wait",
        "tc::mbar_expect_tx",  # K and V arrive by TMA (option tma, the default)
        "tc::mbar_arrive_warp",
        "tc::named_arrive(2, 256)",
        "tc::wgmma_retire<64>",
        "tc::max_nan(",
    ):
        assert needle in src, needle
    body = src[src.index("__launch_bounds__(384) main_kernel") :]
    assert body.count("__syncthreads()") == 1  # once, after the mbarriers are initialized
    assert ", 1, false>((&(acc_s_cast_ptr[0]))" in body  # the second gemm (A in registers) left in flight


@needs_nvcc
@pytest.mark.parametrize("kernel", ["attention", "gemm"])
def test_tma_fed_loops_issue_their_gemms_without_a_proxy_fence(kernel):
    """Only TMA (the async proxy wgmma reads through) writes a TMA-fed loop's stages: its gemms
    skip the per-call fence.proxy.async (FENCE = false); cp.async stages keep it."""
    func = _attention(False) if kernel == "attention" else K.gemm_kernel(1024, 1024, 1024, 128, 256, 64, 3, 256)
    calls = lambda src: re.findall(r"tc::wgmma_(?:ss|rs)<[^(]*>\(", src)  # noqa: E731
    tma = calls(_source(func, WS).source)
    assert tma and all(c.endswith(", false>(") for c in tma)
    cp_async = calls(_source(func, {**WS, "tma": False}).source)
    assert cp_async and not any(c.endswith(", false>(") for c in cp_async)


@needs_nvcc
def test_switched_off_the_kernel_keeps_the_block_barriers():
    src = _source(_attention(False), {"warp_specialize": False}).source
    assert "mbar_wait" not in src and "__launch_bounds__(256)" in src


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case", [(False, 128, 128, 2, 512), (True, 128, 128, 2, 200), (True, 128, 64, 3, 512), (False, 64, 64, 2, 320)]
)
def test_warp_specialized_attention_matches_numpy(case):
    """The plain consumer loop (test_ws_deferred.py runs the same cases with the second gemm deferred)."""
    kern = check_attention_on_gpu(case, defer_gemm=False, **WS)
    assert "mbar_wait" in kern.artifact.source


def check_attention_on_gpu(case, **options):
    """Compile the FlashAttention example for `case` = (causal, block_M, block_N, stages, seq_len)
    with `options`, run it on random fp16 inputs and compare with numpy; returns the Kernel."""
    causal, bm, bn, stages, seq = case
    fa = example("flash_attention")
    kern = tilecore.compile(
        fa.flashattn.prim_func(1, 2, seq, 128, causal, block_M=bm, block_N=bn, num_stages=stages),
        target="cuda",
        out_idx=[3],
        **options,
    )
    import torch

    q, k, v = (torch.randn(1, seq, 2, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kern(q, k, v).double().cpu().numpy()
    ref = fa.reference(*(x.cpu().numpy() for x in (q, k, v)), causal)
    assert np.abs(out - ref).max() < 2e-2
    return kern


@pytest.mark.gpu
@pytest.mark.parametrize("n,bn,stages", [(1000, 128, 3), (1024, 256, 4)])
def test_warp_specialized_gemm_matches_numpy(n, bn, stages):
    art = _source(K.gemm_kernel(n, n, n, bm=128, bn=bn, bk=64, stages=stages, threads=256, predicated=True), WS)
    assert "mbar_wait" in art.source
    check_gemm_on_gpu(art, n)


def check_gemm_on_gpu(art, n):
    """Launch the n x n x n fp16 GEMM `art` on fresh random data (C prefilled with NaN) and compare
    with torch's float32 product."""
    import torch

    launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
    launch([a, b, c], {})
    ref = a.float() @ b.float()
    assert ((c.float() - ref).norm() / ref.norm()).item() < 1e-2


QUICKSTART = dict(bm=128, bn=128, bk=32, stages=3, threads=128)  # TileLang's quickstart GEMM
TWO_PER_SM = {"warp_specialize": True, "ws_blocks_per_sm": 2}


@needs_nvcc
def test_two_blocks_per_sm_ask_ptxas_for_them_and_split_half_the_registers():
    """The quickstart GEMM warp-specialized with option ws_blocks_per_sm=2 compiles (nvcc) with
    launch bounds for 2 blocks of 256 threads and consumers raised to 216 registers."""
    art = _source(K.gemm_kernel(1024, 1024, 1024, **QUICKSTART), TWO_PER_SM)
    src = art.source
    assert art.meta["threads"] == 256 and "__launch_bounds__(256, 2)" in src
    assert "tc::regs_increase<216>" in src and "tc::regs_decrease<40>" in src
    assert "__launch_bounds__(256)" in _source(K.gemm_kernel(1024, 1024, 1024, **QUICKSTART), WS).source
    with pytest.raises(Exception, match="ws_blocks_per_sm must be 1 or 2"):
        _source(K.gemm_kernel(256, 256, 256, **QUICKSTART), {"warp_specialize": True, "ws_blocks_per_sm": 3})


@needs_nvcc
def test_two_blocks_per_sm_are_refused_where_the_registers_do_not_fit():
    """Two consumer warpgroups of a 128x256 float32 accumulator need 128 registers each for it; two
    blocks per SM leave 104: ptxas refused that kernel (C7602), so the plan keeps one block per SM
    and says why; the kernel compiles."""
    from tile_cuda.compiler import _errors_only

    func = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=256, bk=64, stages=3, threads=256)
    art = _source(func, TWO_PER_SM)
    assert "__launch_bounds__(384)" in art.source and "tc::regs_increase<232>" in art.source
    assert any(n.startswith("ws_blocks_per_sm=2: no: the register fragments") for n in art.meta["notes"])
    fatal = (
        "ptxas fatal   : (C7602) Insufficient registers (80) ...\nptxas fatal   : Ptx assembly aborted due to errors"
    )
    assert "C7602" in _errors_only(fatal)  # the compile error names ptxas's reason


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 2048])
def test_two_blocks_per_sm_gemm_matches_torch(n):
    check_gemm_on_gpu(_source(K.gemm_kernel(n, n, n, predicated=n % 128 != 0, **QUICKSTART), TWO_PER_SM), n)


@pytest.mark.gpu
def test_row_max_propagates_nan_on_the_gpu():
    """max.NaN.f32 in the tree reduction: a NaN anywhere in a row gives NaN, other rows exact."""

    @T.prim_func
    def rowmax(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(X, x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y)

    import torch

    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    x[5, 17] = np.nan
    y = tilecore.compile(rowmax, target="cuda", out_idx=[1])(torch.from_numpy(x).cuda()).cpu().numpy()
    ref = np.max(x, axis=1)
    assert np.isnan(y[5]) and np.array_equal(np.delete(y, 5), np.delete(ref, 5))


class _SynchronousTracedGemm:
    """A third party's Gemm rule for cuda, ahead of wgmma: marks each gemm with a helper call and
    lowers it through the wgmma rule without leaving it in flight (a plain callable: no `issue`)."""

    name = "traced_gemm"

    def __call__(self, lowering, g):
        from tvm.backend.cuda import op as cop
        from tvm.tirx.script.builder import ir as B

        from tile_cuda.gemm_rules import WgmmaGemm

        marker = "__device__ __forceinline__ void traced_gemm() {}\n"
        B.evaluate(cop.cuda_func_call("traced_gemm", source_code=marker, return_type="void"))
        return WgmmaGemm()(lowering, g)


def test_ping_pong_gemms_go_through_the_gemm_rule_table():
    """The turns issue their gemms through the rule table (`LoweringRule.issue`), so a rule put
    ahead of wgmma lowers them: here a synchronous one, so nothing is left in flight or retired."""
    from tile_cuda import compiler
    from tilecore.plugin import hookimpl, register_plugin, unregister_plugin

    class ThirdParty:
        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            if backend.name == "cuda":
                rules.add("Gemm", _SynchronousTracedGemm(), priority=10)

    def source():
        low, _ = tilecore.lower(_attention(False), target="cuda:sm_90a", warp_specialize=True)
        return compiler.generate_source(low, "sm_90a", WS)[0]

    turns = "tc::named_arrive(2, 256)"
    before = source()
    assert turns in before and "tc::wgmma_retire" in before and "traced_gemm" not in before
    name = register_plugin(ThirdParty(), name="test-traced-gemm")
    try:
        after = source()
    finally:
        unregister_plugin(name)
    assert turns in after and after.count("traced_gemm();") == 2 and "tc::wgmma_retire" not in after
