"""Per-tile loads by the producer of a persistent warp-specialized kernel (tile_cuda/ws_tile_loads.py,
option tile_loads): which copies qualify (planning, pure Python) and the handshake in the generated
code; on a GPU, test_persistent.py's attention cases with the option on."""

import re

from test_persistent import _attention, _claim

from tile_cuda import compiler

BIG = dict(batch=4, heads=32, seq=4096)  # 4096 tiles: persistent by default when causal
ON = {"tile_loads": True}


def test_causal_attention_loads_q_per_tile_in_the_producer():
    # option tile_loads "auto" (default): not in causal attention's snake rounds, in non-causal's rounds
    assert _claim(_attention(True, **BIG), {})[0].tile_loads == ()
    assert [t.copy.dst.buffer.name for t in _claim(_attention(False, **BIG), {})[0].tile_loads] == ["Q_shared"]
    assert _claim(_attention(False, **BIG), {"tile_loads": False})[0].tile_loads == ()
    info, notes = _claim(_attention(True, **BIG), ON)
    assert [t.copy.dst.buffer.name for t in info.tile_loads] == ["Q_shared"]
    assert "copy into Q_shared: loaded per tile by the producer (TMA, 2 boxes)" in notes
    assert info.tile_loads[0].spec.param == "tc_tmap3"  # after K's, V's and the store's names
    # not persistent, the plain GEMM's form, or a cp.async producer: the consumers copy as before
    assert _claim(_attention(True, **BIG), {**ON, "persistent": False})[0].tile_loads == ()
    assert _claim(_attention(False, **BIG), {**ON, "persistent": False})[0].tile_loads == ()
    assert _claim(_attention(True, **BIG), {**ON, "tma": False})[0].tile_loads == ()
    assert _claim(_attention(False, **BIG), {**ON, "persistent": True})[0].tile_loads != ()


def test_the_copy_becomes_a_wait_and_the_loop_end_releases_the_tile():
    src = compiler.generate_source(_attention(True, **BIG), "sm_90a", ON)[0]
    body = src[src.index("__global__") :]
    full, empty = 25096, 25097  # after the 2 copies x 2 stages x (full, empty) stage mbarriers
    assert f"tc::mbar_init((&(((uint64_t*)smem_pool_ptr)[{full}])), 1);" in body  # one TMA arrival
    assert f"tc::mbar_init((&(((uint64_t*)smem_pool_ptr)[{empty}])), 8);" in body  # 8 consumer warps
    # consumers: the copy's place waits for the tile's load (parity: the tile's ordinal), no copy of Q
    assert re.search(rf"tc::mbar_wait\(\(&\(\(\(uint64_t\*\)smem_pool_ptr\)\[{full}\]\)\), \(v & 1\)\);", body)
    assert "Q_ptr" not in body
    # released once per tile after the loop, before the epilogue's division
    release = body.index(f"tc::mbar_arrive_warp((&(((uint64_t*)smem_pool_ptr)[{empty}])));")
    assert body.index("/ logsum_ptr[0]", release) > release
    assert body.count(f"[{empty}]") == 3  # its initialization, the release and the producer's wait
    # producer: waits for the previous tile's release, then the bytes and two boxes
    wait = re.search(
        rf"tc::mbar_wait\(\(&\(\(\(uint64_t\*\)smem_pool_ptr\)\[{empty}\]\)\), \(\((\w+) \+ 1\) & 1\)\);", body
    )
    assert wait, "the producer's wait"
    assert f"tc::mbar_expect_tx((&(((uint64_t*)smem_pool_ptr)[{full}])), 32768);" in body
    assert body.count("tc_tmap3,") == 2
