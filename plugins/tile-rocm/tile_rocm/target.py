"""The target description of an AMD GPU for the SIMT lowering toolkit."""

from __future__ import annotations

from typing import Any, Dict

from . import toolchain


def rocm_target(arch: str, options: Dict[str, Any]):
    """The `TargetDescription` of `arch` ("gfx90a", "gfx942", ...): wave64 (wave32 on RDNA), LDS
    as one static allocation per tile (TVM 0.27's AMDGPU codegen turns typed views of one pool
    into global-memory accesses), bool tiles in int8 (TVM vectorizes bool stores into invalid IR),
    int64 data wrapping through int128 (an LLVM codegen)."""
    from tilecore.lowering.target import TargetDescription

    return TargetDescription(
        name="rocm",
        arch=arch,
        tvm_target=tvm_target(arch),
        warp_size=toolchain.wave_size(arch),
        max_shared_memory=toolchain.lds_bytes(arch),
        shared_scope="shared",
        shared_pool=False,
        max_vector_lanes=16,
        max_vector_element_bytes=16,
        bool_storage="int8",
        bool_vectors=True,
        bfloat16_computed_in_float32=True,  # TVM legalizes bfloat16 for AMDGPU
        int64_wrap_via="int128",  # TVM's AMDGPU codegen is LLVM's: uint64 arithmetic is `nuw`
    )


def tvm_target(arch: str) -> dict:
    """TVM's ROCm target dict for `arch`."""
    wave = toolchain.wave_size(arch)
    target = {"kind": "rocm", "mcpu": arch, "max_num_threads": 1024, "thread_warp_size": wave}
    if wave == 32:
        target["mattr"] = ["+wavefrontsize32"]
    return target
