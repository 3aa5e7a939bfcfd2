"""The target description of an NVIDIA GPU for the SIMT lowering toolkit."""

from __future__ import annotations

from typing import Any, Dict

from . import toolchain

# bytes of shared memory per block, by compute capability (sm_XY -> XY)
SHARED_MEMORY = {
    80: 163 * 1024,
    86: 99 * 1024,
    87: 163 * 1024,
    89: 99 * 1024,
    90: 227 * 1024,
    100: 227 * 1024,
    120: 99 * 1024,
}


def cuda_target(arch: str, options: Dict[str, Any]):
    """The `TargetDescription` of `arch` ("sm_80", "sm_90a", ...) under the compile `options`.

    `properties`: "sm" (the compute capability as an int), "wgmma" (option wgmma, default on),
    "wgmma_overlap" (option wgmma_overlap, default "release": the overlapped wgmma main loop of
    `wgmma_pipeline`; False/"" off, "slack" or "release" on, True = "slack") and "fast_math"
    (option fast_math, default off: accurate math, as the conformance ULP table requires) and
    "warp_specialize" (option warp_specialize, `warp_specialize_mode`: the producer-warpgroup pipeline of
    `warp_specialize`) and "tma" (option tma, default on: `tma`'s TMA loads in that pipeline) and
    "split_k" (option split_k, `split_k_option`: None = auto, 1 = off, n = n splits; `split_k`) and
    "defer_gemm" (option defer_gemm: `ws_deferred`'s second gemm kept in flight into the next
    iteration of a warp-specialized loop) and "tile_loads" (option tile_loads, `off_on_auto`:
    `ws_tile_loads`' per-tile copies by a persistent kernel's producer; "auto" where the tiles' trip
    counts are equal) and "persistent" (option persistent,
    `persistent.persistent_mode`: "" off, "on", "auto") and "tma_store" (option tma_store,
    `tma_store_mode`: "auto" by default, "on", "" off: `tma_store`'s epilogue) and "ws_blocks_per_sm"
    (option ws_blocks_per_sm, 1 or 2: the warp-specialized blocks one SM holds, which the register
    split plans for) and "tma_multicast" (option tma_multicast: clusters of two blocks sharing
    stage loads, `cluster`) and "staging_swizzle" (option staging_swizzle, default on: `staging_tiles`'
    swizzled epilogue staging tiles), read by tile-cuda's rules and intrinsics.
    """
    from tilecore.lowering.target import TargetDescription

    from .device_lib import CUDA_DEVICE_LIB
    from .persistent import persistent_mode
    from .retile import retile_mode

    sm = toolchain.arch_number(arch)
    smem = SHARED_MEMORY.get(sm, 48 * 1024 if sm < 80 else 99 * 1024)
    return TargetDescription(
        name="cuda",
        arch=arch,
        tvm_target={"kind": "cuda", "arch": arch},
        warp_size=32,
        max_shared_memory=smem,
        shared_scope="shared.dyn",
        shared_pool=True,
        shared_alignment=128,
        max_vector_lanes=16,
        max_vector_element_bytes=16,
        bool_storage="bool",
        bool_vectors=True,
        device_library=CUDA_DEVICE_LIB,
        gemm_block_panel=gemm_block_panel(options.get("gemm_block_panel")),
        heavy_first_group_blocks=heavy_first_group_blocks(options.get("heavy_first_group_blocks")),
        properties={
            "sm": sm,
            "wgmma": bool(options.get("wgmma", True)),
            "wgmma_overlap": overlap_schedule(options.get("wgmma_overlap", DEFAULT_OVERLAP)),
            "fast_math": bool(options.get("fast_math", False)),
            "warp_specialize": warp_specialize_mode(options.get("warp_specialize")),
            "tma": bool(options.get("tma", True)),
            "split_k": split_k_option(options.get("split_k")),
            "defer_gemm": bool(options.get("defer_gemm", DEFAULT_DEFER_GEMM)),
            "tile_loads": off_on_auto("tile_loads", options.get("tile_loads", DEFAULT_TILE_LOADS)),
            "persistent": persistent_mode(options.get("persistent", "auto")),
            "tma_store": tma_store_mode(options.get("tma_store")),
            "ws_blocks_per_sm": ws_blocks_per_sm(options.get("ws_blocks_per_sm", 1)),
            "tma_multicast": bool(options.get("tma_multicast", False)),
            "retile_gemm": retile_mode(options.get("retile_gemm", "auto")),
            "staging_swizzle": bool(options.get("staging_swizzle", True)),
        },
    )


def off_on_auto(option: str, value) -> str:
    """A compile option of False / True / "auto" as its mode: False or None -> "" (off), True -> "on",
    "auto" -> "auto"; anything else is an error naming `option`."""
    if value is None or value is False:
        return ""
    if value is True:
        return "on"
    if value == "auto":
        return "auto"
    raise ValueError(f"compile option {option} must be True, False or 'auto', got {value!r}")


def ws_blocks_per_sm(value) -> int:
    """Option ws_blocks_per_sm: 1 (default) or 2."""
    if value not in (1, 2) or isinstance(value, bool):
        raise ValueError(f"ws_blocks_per_sm must be 1 or 2, got {value!r}")
    return int(value)


def has_mma_sync(target) -> bool:
    """Warp-level tensor-core MMA (mma.sync m16n8k16), ldmatrix and cp.async: sm_80 and newer."""
    return target.prop("sm", 0) >= 80


def has_wgmma(target) -> bool:
    """Warpgroup MMA (wgmma.mma_async): sm_90a only, and not switched off by the option wgmma=False."""
    return target.arch == "sm_90a" and target.prop("wgmma", True)


OVERLAP_SCHEDULES = ("slack", "release")
# panel of the L2-friendly block order of gemm kernels (TargetDescription.gemm_block_panel): a
# panel of 8 block rows is what the fastest hand-tuned GEMM of benchmarks/results used
GEMM_BLOCK_PANEL = 8
# causal attention's longest-first block order in groups of about this many blocks
# (TargetDescription.heavy_first_group_blocks): B4 H32 S4096 128x128 causal on an H100, 9 rounds
# (benchmarks/results/gpu-session20/call7_lpt): groups of 2 (head, batch) pairs = 64 blocks 0.909x
# cuDNN, of 4 (128 blocks) 0.903x, of 8 0.880x, within each pair alone 0.874x
HEAVY_FIRST_GROUP_BLOCKS = 64
# measured fastest on the H200 (benchmarks/results/h200-session5) and checked by its GPU test matrix
DEFAULT_OVERLAP = "release"
# the producer-warpgroup pipeline (`warp_specialize`): by default for blocks of two or more
# warpgroups (faster on the H200 for attention and large GEMMs, benchmarks/results/h200-session7);
# one-warpgroup blocks keep the overlapped wgmma loop unless the option asks for it
DEFAULT_WARP_SPECIALIZE = None
# FlashAttention-3's intra-warpgroup overlap in warp-specialized loops with two gemms (`ws_deferred`):
# attention 1.01x / 0.83x cuDNN (non-causal / causal) against 0.86x / 0.79x without it, same run
# (benchmarks/results/h200-session12/)
DEFAULT_DEFER_GEMM = True
# option tile_loads (`ws_tile_loads`): "auto" = per-tile loads in persistent kernels whose tiles have
# equal trip counts (and persistent="auto" takes such kernels with them: non-causal attention), not in
# snake rounds (causal). Session 22, one H100 (benchmarks/results/gpu-session22), B4 H32 S4096 D128:
# non-causal with them 1.977-1.988 ms (medians of 3 calls, timed last in its group in one call)
# against 1.996-2.067 ms one block per tile; causal 1.163-1.180 ms against 1.154-1.165 ms without
DEFAULT_TILE_LOADS = "auto"


def warp_specialize_mode(value) -> str:
    """Option warp_specialize: None -> "auto" (blocks of two or more warpgroups), True -> "on"
    (every block), False -> "" (off)."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "on" if value else ""
    raise ValueError(f"compile option warp_specialize must be True, False or None, got {value!r}")


def overlap_schedule(value) -> str:
    """The overlapped wgmma main loop that option wgmma_overlap asks for ("" = off; see
    `wgmma_pipeline`): False/None -> "", True -> "slack", or one of OVERLAP_SCHEDULES by name."""
    if value is None or value is False or value == "":
        return ""
    if value is True:
        return "slack"
    if value in OVERLAP_SCHEDULES:
        return value
    raise ValueError(f"compile option wgmma_overlap must be True, False or one of {OVERLAP_SCHEDULES}, got {value!r}")


def _count_option(name: str, value, default: int) -> int:
    """An option that is a count >= 0: None -> `default`, else the int itself."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"compile option {name} must be an int >= 0, got {value!r}")
    return value


def heavy_first_group_blocks(value) -> int:
    """Option heavy_first_group_blocks: None -> HEAVY_FIRST_GROUP_BLOCKS, else a block count >= 0
    (0: the longest blocks first within each (head, batch) alone)."""
    return _count_option("heavy_first_group_blocks", value, HEAVY_FIRST_GROUP_BLOCKS)


def gemm_block_panel(value) -> int:
    """Option gemm_block_panel: None -> GEMM_BLOCK_PANEL, else a panel size >= 0 (0: launch order)."""
    return _count_option("gemm_block_panel", value, GEMM_BLOCK_PANEL)


def tma_store_mode(value) -> str:
    """Option tma_store: None -> "auto" (blocks of at least `tma_store.AUTO_MIN_THREADS` consumer threads),
    True -> "on" (every eligible epilogue), False -> "" (off)."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "on" if value else ""
    raise ValueError(f"compile option tma_store must be True, False or None, got {value!r}")


def split_k_option(value):
    """Option split_k: None (auto: small grids with long K loops, `split_k.choose_splits`), 0/1 or
    False (off), or a split count n >= 2 (forced wherever the kernel has the plain form)."""
    if value is None:
        return None
    if value is False:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"compile option split_k must be None, False or an int >= 0, got {value!r}")
    return max(1, value)
