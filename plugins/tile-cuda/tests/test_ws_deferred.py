"""The deferred second gemm of a warp-specialized loop (tile_cuda/ws_deferred.py, option defer_gemm):
which bodies qualify and how their statements split (planning, pure Python), what the generated
code does (compile tier), and results on a GPU."""

import kernels as K
import pytest
from test_warp_specialize import _attention, _claim, _source, _SynchronousTracedGemm, check_attention_on_gpu

import tilecore
import tilecore.language as T
from tile_cuda import toolchain
from tile_cuda.ws_deferred import deferred_gemm

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
DEFER = {"warp_specialize": True, "defer_gemm": True}


def _names(body, indices):
    """A short description of each statement: its kind and the buffer it writes."""
    out = []
    for i in indices:
        s = body[i]
        target = getattr(getattr(s, "dst", None), "buffer", None) or getattr(s, "dst", None)
        out.append(f"{type(s).__name__}:{getattr(target, 'name', '')}")
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_attention_defers_pv_and_overlaps_the_softmax_of_the_next_block(causal):
    """S = Q K^T is G1 and O += P V is G2; rescaling O (touches G2's accumulator) and casting P
    (writes G2's A operand) are late; the row maxima, the scale and exp2 of the scores run while
    G2 of the previous block is on the tensor cores."""
    info = _claim(_attention(causal), DEFER)
    plan = info.deferred
    assert plan is not None
    from tile_cuda.warp_specialize import _body

    body = _body(info)
    assert body[plan.first].c.buffer.name == "acc_s" and body[plan.second].c.buffer.name == "acc_o"
    late = _names(body, plan.late)
    assert late == ["Parallel:", "Copy:acc_s_cast"]  # acc_o *= scale, then the cast of P
    assert "Reduce:scores_max" in _names(body, plan.early)
    # the order keeps every dependence: each late statement after the early ones it could conflict with
    order = plan.order(len(body))
    assert sorted(order) == sorted(set(range(len(body))) - {plan.second})


def test_option_off_single_gemm_and_other_forms_are_not_deferred():
    assert _claim(_attention(False), {"warp_specialize": True}).deferred is not None  # default on
    assert _claim(_attention(False), {"warp_specialize": True, "defer_gemm": False}).deferred is None
    gemm = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=256, bk=64, stages=3, threads=256)
    assert _claim(gemm, DEFER).deferred is None  # one gemm: nothing to defer


def _two_gemms_reading_the_second_accumulator():
    """The body reads G2's accumulator after G2 (into another fragment): G2 cannot be deferred."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((512, 64), "float16"), O: T.Tensor((256, 64), "float32")):
        with T.Kernel(2, threads=256) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            V_s = T.alloc_shared((64, 64), "float16")
            s = T.alloc_fragment((128, 64), "float32")
            p = T.alloc_fragment((128, 64), "float16")
            o = T.alloc_fragment((128, 64), "float32")
            keep = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], A_s)
            T.clear(o)
            T.clear(keep)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(B[k * 64, 0], B_s)
                T.clear(s)
                T.gemm(A_s, B_s, s, transpose_B=True)
                T.copy(B[k * 64, 0], V_s)
                for i, j in T.Parallel(128, 64):
                    s[i, j] = T.exp2(s[i, j])
                T.copy(s, p)
                T.gemm(p, V_s, o)
                for i, j in T.Parallel(128, 64):
                    keep[i, j] = keep[i, j] + o[i, j]
            T.copy(keep, O[bx * 128, 0])

    return main


def test_a_body_reading_the_second_accumulator_is_not_deferred():
    info = _claim(_two_gemms_reading_the_second_accumulator(), DEFER)
    assert info is not None and info.deferred is None


def test_deferred_gemm_needs_g2_alone_on_its_stage():
    """A staged buffer G2 shares with another reader of the iteration rules the deferral out."""
    info = _claim(_attention(False), DEFER)
    from tile_cuda.warp_specialize import _body

    body = _body(info)
    plan = info.deferred
    readers = [(plan.first, plan.first), (plan.first, plan.second)]  # as if G1 read V too
    assert deferred_gemm(body, readers) is None


@needs_nvcc
@pytest.mark.parametrize("causal", [False, True])
def test_deferred_attention_source(causal):
    """In the loop, G1 (shared A) is issued, then G2 of the previous block (A in registers), the
    turn passed, and G1 alone retired (wait_group 1); G2 is retired
    before O is rescaled; G1 of block 0 is peeled before the loop and G2 of the last after it."""
    src = _source(_attention(causal), DEFER).source
    body = src[src.index("__launch_bounds__(384) main_kernel") :]
    g1 = body.index("tc::wgmma_ss<", body.index("for (int"))
    g2 = body.index("tc::wgmma_rs<", g1)
    fence = body.index("tc::wgmma_retire<64, 1>((&(acc_s_ptr[0])))", g2)
    retire = body.index("tc::wgmma_retire<64>((&(acc_o_ptr[0])))", fence)
    assert ", 2, false>((&(acc_s_cast_ptr[0]))" in body[g2:fence]  # G1 and G2 both in flight
    assert "tc::named_arrive" in body[g2:fence]  # the turn passes before any wait
    assert "exp2" in body[fence:retire]  # the softmax runs while G2 is in flight
    assert body.count("tc::wgmma_ss<") == 2 and body.count("tc::wgmma_rs<") == 2
    off = {"warp_specialize": True, "defer_gemm": False}
    assert "tc::wgmma_retire<64, 1>" not in _source(_attention(causal), off).source


def test_a_gemm_rule_ahead_of_wgmma_gets_the_plain_consumer_loop():
    """The deferred schedule issues wgmma itself, so with a third party's Gemm rule first the
    kernel keeps the rule-table path (the rule lowers both gemms, nothing is deferred)."""
    from tile_cuda import compiler
    from tilecore.plugin import hookimpl, register_plugin, unregister_plugin

    class ThirdParty:
        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            if backend.name == "cuda":
                rules.add("Gemm", _SynchronousTracedGemm(), priority=10)

    name = register_plugin(ThirdParty(), name="test-traced-gemm-deferred")
    try:
        low, _ = tilecore.lower(_attention(False), target="cuda:sm_90a", **DEFER)
        src = compiler.generate_source(low, "sm_90a", DEFER)[0]
    finally:
        unregister_plugin(name)
    assert src.count("traced_gemm();") == 2 and "tc::wgmma_retire<64, 1>" not in src


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        (False, 128, 128, 2, 512),
        (True, 128, 128, 2, 512),
        (True, 128, 128, 2, 200),  # a partial last KV block
        (True, 128, 64, 3, 512),
        (False, 128, 128, 2, 128),  # one KV block: prologue and epilogue only
        (False, 64, 64, 2, 320),  # one warpgroup: no turns
    ],
)
def test_deferred_attention_matches_numpy(case):
    kern = check_attention_on_gpu(case, **DEFER)
    assert "deferred" in " ".join(kern.artifact.meta.get("notes", ()))


@needs_nvcc
def test_causal_mask_is_a_plain_fill_off_the_diagonal():
    """tilecore.lowering.uniform_select: in the loop, a tile wholly at or below the diagonal fills
    the scores with 0 and one wholly above it with -inf, without the per-element compare; only a
    tile crossing the diagonal keeps the select."""
    src = _source(_attention(True), DEFER).source
    loop = src[src.index("for (int", src.index("__launch_bounds__(384) main_kernel")) :]
    zero_fill = loop.index("acc_s_ptr[0] = 0x0p+0f")
    inf_fill = loop.index("acc_s_ptr[0] = -CUDART_INF_F;")
    select = loop.index("acc_s_ptr[0] = ((")
    assert zero_fill < inf_fill < select and "?" not in loop[zero_fill:inf_fill]
    # block_order: the query blocks run backwards, the longest first, by default in groups of the
    # (head, batch) tuples (here both heads in one group: launch index x + 4y walks the heads first,
    # so query block 3 - ((x + 4y) >> 1) and trip count 4 - (x >> 1) - 2y); with
    # heavy_first_group_blocks=0 within each head alone (trip count 4 - x)
    assert "((4 - (((int)blockIdx.x) >> 1)) - (((int)blockIdx.y) * 2))" in src
    assert "(4 - ((int)blockIdx.x))" not in src
    alone = _source(_attention(True), {**DEFER, "heavy_first_group_blocks": 0}).source
    assert "(4 - ((int)blockIdx.x))" in alone
