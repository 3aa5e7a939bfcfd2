"""Atomics and the workgroup barrier for ROCm: a small LLVM IR library of `tc_atomic_<op>_<type>_<space>` functions
(one `atomicrmw` each) that TVM links into the device module with the ROCm device libraries.

TVM 0.27's AMDGPU codegen emits only 32-bit atomic adds; LLVM's AMDGPU backend handles every
`atomicrmw` (sub-word and floating-point ones by its own compare-and-swap expansion), so
add / max / min on 8- to 64-bit integers, float16, float32 and float64 all become hardware
atomics here. Pure Python (writes text); the plugin hands the file to TVM's bitcode callback.
"""

from __future__ import annotations

import hashlib

# Tile IR dtype -> (LLVM type, signed integer?, is float)
ATOMIC_TYPES = {
    "int8": ("i8", True, False),
    "uint8": ("i8", False, False),
    "int16": ("i16", True, False),
    "int32": ("i32", True, False),
    "int64": ("i64", True, False),
    "float16": ("half", None, True),
    "float32": ("float", None, True),
    "float64": ("double", None, True),
}
SPACES = {"global": 1, "shared": 3}


def helper_name(kind: str, dtype: str, space: str) -> str:
    """The helper for `T.atomic_<kind>` on a `dtype` element in `space` ("global" or "shared")."""
    return f"tc_atomic_{kind}_{dtype}_{space}"


def _op(kind, signed, is_float):
    if is_float:
        return {"add": "fadd", "max": "fmax", "min": "fmin"}[kind]
    if kind == "add":
        return "add"
    return kind if signed else "u" + kind


def library_ir() -> str:
    """The LLVM IR text of every helper."""
    out = []
    for dtype, (ty, signed, is_float) in ATOMIC_TYPES.items():
        for space, addr in SPACES.items():
            for kind in ("add", "max", "min"):
                out.append(
                    f"define linkonce_odr hidden void @{helper_name(kind, dtype, space)}"
                    f"(ptr addrspace({addr}) %p, {ty} %v) #0 {{\n"
                    f"  %old = atomicrmw {_op(kind, signed, is_float)} ptr addrspace({addr}) %p, {ty} %v "
                    f'syncscope("agent") monotonic\n  ret void\n}}\n'
                )
    # __syncthreads as HIP defines it: TVM 0.27 lowers its barrier to a bare s_barrier, which on
    # gfx90a and newer (back-off barriers) does not wait for this wave's LDS writes to land
    out.append("declare void @llvm.amdgcn.s.barrier() #1\n")
    out.append(
        "define linkonce_odr hidden void @tc_barrier() #0 {\n"
        '  fence syncscope("workgroup") release\n'
        "  call void @llvm.amdgcn.s.barrier()\n"
        '  fence syncscope("workgroup") acquire\n  ret void\n}\n'
    )
    out.append("attributes #0 = { alwaysinline nounwind }\n")
    out.append("attributes #1 = { convergent nounwind }\n")
    return "\n".join(out)


def library_path() -> str:
    """A file holding `library_ir()`, in this process's private temp folder (mkdtemp, 0700,
    removed at exit: never a fixed path another user could write first), checked against the
    text's digest every time it is handed to the linker."""
    from tilecore.runtime.folders import process_tempdir, write_private_file

    data = library_ir().encode()
    digest = hashlib.sha256(data).hexdigest()
    path = write_private_file(process_tempdir("rocm"), f"device_lib_{digest[:16]}.ll", data)
    with open(path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != digest:
            raise RuntimeError(f"{path} changed after it was written")
    return path
