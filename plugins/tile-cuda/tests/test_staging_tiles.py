"""Swizzled epilogue staging tiles (tile_cuda/staging_tiles.py, option staging_swizzle): which tiles
(planning, pure Python), the conflict-free 4-byte pair stores in the generated code, and on a GPU
the same bits as the row-major tile."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_persistent import _attention

import tilecore.language as T
from tile_cuda import compiler
from tile_cuda.rules import cuda_plan
from tile_cuda.staging_tiles import STAGING_CLAIM
from tilecore.lowering.simt_layout import SharedLayout

OFF = {"staging_swizzle": False}


def staged_gemm(M, N, K, bm=128, bn=128, bk=32, threads=128, read_back=False, dtype="float16"):
    """A GEMM whose epilogue goes through a shared tile: C_f -> C_s -> C (`read_back`: a parallel
    loop also reads C_s)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            C_s = T.alloc_shared((bm, bn), dtype)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            if read_back:
                for i, j in T.Parallel(bm, bn):
                    C_s[i, j] = C_s[i, j] * 2
            T.copy(C_s, C[by * bm, bx * bn])

    return main


def copy_through(M, N, bm=64, dtype="float16"):
    """Global -> shared -> global, no fragment: not an epilogue's staging tile."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            S = T.alloc_shared((bm, N), dtype)
            T.copy(A[bx * bm, 0], S)
            T.copy(S, B[bx * bm, 0])

    return main


def _layout(func, name, options=None):
    plan = cuda_plan(func, "sm_90a", options)
    return plan.layout[name], plan.claims.get(STAGING_CLAIM, {})


# ------------------------------------------------------------------ planning (pure Python)


def test_attention_and_a_staged_gemm_swizzle_their_staging_tile():
    lay, claims = _layout(_attention(False), "O_shared")
    assert isinstance(lay, SharedLayout) and lay.swizzle and not lay.blocked
    assert sorted(claims.values()) == ["O_shared", "O_shared"]  # the fill and the drain
    lay, claims = _layout(staged_gemm(256, 256, 64), "C_s")
    assert lay.swizzle and len(claims) == 2
    assert not _layout(_attention(False), "O_shared", OFF)[0].swizzle  # option staging_swizzle=False


def test_other_shared_tiles_keep_their_layout():
    # read by a parallel loop too: not a staging tile (its layout is not the rule's alone)
    assert not _layout(staged_gemm(256, 256, 64, read_back=True), "C_s")[0].swizzle
    # a tile filled from global memory, not from a fragment, and drained to global memory
    lay, claims = _layout(copy_through(256, 128), "S")
    assert not lay.swizzle and not claims
    # a gemm operand filled from global memory is swizzled by the gemm rules, not claimed here
    lay, claims = _layout(staged_gemm(256, 256, 64), "A_s")
    assert all(name == "C_s" for name in claims.values())


def _offset(lay, i, j):
    return lay.offset2d(i, j, lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ^ b)


def _ways(words):
    """The most distinct 8-byte words of one wavefront that share a bank."""
    banks = {}
    for w in set(words):
        for k in (0, 1):
            banks.setdefault((w + k) % 32, set()).add(w)
    return max(len(v) for v in banks.values())


@settings(deadline=None, max_examples=30)
@given(rows=st.sampled_from([16, 64, 128]), cols=st.sampled_from([16, 32, 64, 128, 256]), elem=st.sampled_from([2, 4]))
def test_the_swizzled_tile_takes_a_warps_pair_stores_without_bank_conflicts(rows, cols, elem):
    """The 8 rows x 4 column pairs one warp instruction of an MMA fragment stores (lane l: row l // 4,
    columns 2 (l % 4) and + 1) land in distinct 4-byte banks in the swizzled layout, each pair
    contiguous; every element keeps its own address (the drain reads what the fill wrote)."""
    lay = SharedLayout((rows, cols), elem, swizzle=True)
    if not SharedLayout.can_swizzle(lay.shape, elem) or cols * elem < 128:
        return  # narrower rows repeat a bank within 8 rows: not what the rule is for
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, 8):
            words = [(_offset(lay, r0 + lane // 4, c0 + 2 * (lane % 4)) * elem) // 4 for lane in range(32)]
            if elem == 2:  # a half2 pair: one 4-byte word, the second element right after the first
                assert all(
                    _offset(lay, r0 + ln // 4, c0 + 2 * (ln % 4) + 1)
                    == _offset(lay, r0 + ln // 4, c0 + 2 * (ln % 4)) + 1
                    for ln in range(32)
                )
                assert len({w % 32 for w in words}) == 32
            else:  # float32 pairs (8-byte vectors, a half-warp per wavefront): fewer conflicts than row-major
                rowmajor = [((r0 + ln // 4) * cols + c0 + 2 * (ln % 4)) * elem // 4 for ln in range(32)]
                for lo in (0, 16):
                    assert _ways(words[lo : lo + 16]) < _ways(rowmajor[lo : lo + 16])
    assert sorted(_offset(lay, i, j) for i in range(rows) for j in range(cols)) == list(range(rows * cols))


# ------------------------------------------------------------------ generated code


def _epilogue(src):
    body = src[src.index("__global__") :]
    return body[body.rindex("/ logsum_ptr[1]") :] if "logsum_ptr" in body else body


def test_the_fragment_pairs_are_stored_as_four_byte_vectors_in_swizzled_chunks():
    """Attention's 64 accumulator values per thread: 32 half2 stores into the staging tile, each
    row's 16-byte chunk XORed with the row's low three bits (the 8 rows a warp instruction writes
    land in 8 chunks); the tile leaves in 16-byte vectors read from the same swizzled chunks."""
    src = compiler.generate_source(_attention(False), "sm_90a", {})[0]
    epi = _epilogue(src)
    pairs = [line for line in epi.splitlines() if line.strip().startswith("*(half2*)(((half*)smem_pool_ptr)")]
    assert len(pairs) == 32 and all(" ^ " in p for p in pairs)
    assert "= ((half)acc_o_ptr" not in epi  # no 16-bit element stores left
    reads = [line for line in epi.splitlines() if "tc::copy16((&(Output_ptr" in line]
    assert len(reads) == 8 and all(" ^ " in r.split("smem_pool_ptr")[1] for r in reads)
    # without the option: the same pair stores into the row-major tile
    plain = _epilogue(compiler.generate_source(_attention(False), "sm_90a", OFF)[0])
    pairs = [line for line in plain.splitlines() if line.strip().startswith("*(half2*)(((half*)smem_pool_ptr)")]
    assert len(pairs) == 32 and not any(" ^ " in p for p in pairs)


# ------------------------------------------------------------------ on a GPU


def _run(func, options, args):
    import torch

    import tilecore

    kern = tilecore.compile(func, target="cuda", **options)
    out = torch.zeros_like(args[-1])
    kern(*args[:-1], out)
    torch.cuda.synchronize()
    return out


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape", [(256, 256, 64, 128, 128, 128), (384, 256, 96, 128, 64, 128), (128, 512, 64, 64, 256, 256)]
)
def test_a_staged_gemm_matches_the_row_major_tile_and_torch(shape):
    import torch

    M, N, K, bm, bn, threads = shape
    func = staged_gemm(M, N, K, bm=bm, bn=bn, threads=threads)
    assert _layout(func, "C_s")[0].swizzle
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    swizzled, plain = _run(func, {}, [a, b, c]), _run(func, OFF, [a, b, c])
    assert torch.equal(swizzled, plain)  # only the staging layout differs: the same bits
    ref = a.double() @ b.double()
    assert ((swizzled.double() - ref).norm() / ref.norm()).item() < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_the_row_major_tile(causal):
    import torch

    func = _attention(causal, batch=2, heads=4, seq=1024)
    q, k, v = (torch.randn(2, 1024, 4, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    swizzled, plain = _run(func, {}, [q, k, v, out]), _run(func, OFF, [q, k, v, out])
    assert torch.equal(swizzled, plain)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2).float() for x in (q, k, v)), is_causal=causal
    ).transpose(1, 2)
    assert ((swizzled.float() - ref).norm() / ref.norm()).item() < 2e-3
