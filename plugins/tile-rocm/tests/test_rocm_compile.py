"""Compile tier: AMDGPU code objects built here by TVM's ROCm target and ld.lld (no AMD GPU needed)."""

import re
import struct

import numpy as np
import pytest

import tilecore
from tile_rocm import plugin, toolchain
from tilecore.testing import hide_distribution

pytestmark = pytest.mark.skipif(
    toolchain.find_lld() is None or toolchain.find_rocm_path() is None,
    reason="ld.lld-22 or rocm-device-libs missing (apt-get install lld-22 rocm-device-libs)",
)

EM_AMDGPU = 224
# e_flags EF_AMDGPU_MACH values (LLVM's ELF.h)
MACH = {"gfx908": 0x30, "gfx90a": 0x3F, "gfx942": 0x4C, "gfx950": 0x4F}


def elf_header(blob):
    assert blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1  # 64-bit little endian
    e_machine = struct.unpack_from("<H", blob, 18)[0]
    e_flags = struct.unpack_from("<I", blob, 48)[0]
    return e_machine, e_flags


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950"])
def test_gemm_code_object_is_amdgpu_elf_for_the_arch_with_mfma(gemm_func, arch):
    k = tilecore.compile(gemm_func(), target=f"rocm:{arch}", out_idx=[-1])
    art = k.artifact
    machine, flags = elf_header(art.blobs["hsaco"])
    assert machine == EM_AMDGPU
    assert flags & 0xFF == MACH[arch]
    mfma = re.findall(r"^\s+(v_mfma_\w+)", art.source, re.M)
    assert mfma and all("f16" in m for m in mfma), mfma
    assert "ds_read" in art.source and "ds_write" in art.source  # operands staged in LDS
    assert art.meta["wave_size"] == 64


@pytest.mark.parametrize(
    "dtype,accum,op", [("bfloat16", "float32", "v_mfma_f32_16x16x16_bf16"), ("int8", "int32", "v_mfma_i32_16x16x32_i8")]
)
def test_bf16_and_int8_gemm_use_mfma_on_gfx942(gemm_func, dtype, accum, op):
    k = tilecore.compile(
        gemm_func(dtype=dtype, accum=accum, bk=64 if dtype == "int8" else 32), target="rocm:gfx942", out_idx=[-1]
    )
    assert op in k.artifact.source


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposed_gemm_uses_mfma(gemm_func, ta, tb):
    k = tilecore.compile(gemm_func(ta=ta, tb=tb), target="rocm:gfx90a", out_idx=[-1])
    assert "v_mfma_f32_16x16x16f16" in k.artifact.source


def test_objdump_finds_mfma_in_gfx90a_code_object(gemm_func, tmp_path):
    import shutil
    import subprocess

    objdump = shutil.which("llvm-objdump-22") or shutil.which("llvm-objdump")
    if objdump is None:
        pytest.skip("no llvm-objdump")
    k = tilecore.compile(gemm_func(), target="rocm:gfx90a", out_idx=[-1])
    path = tmp_path / "k.hsaco"
    path.write_bytes(k.artifact.blobs["hsaco"])
    out = subprocess.run([objdump, "-d", "--mcpu=gfx90a", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"llvm-objdump cannot read this code object: {out.stderr[:200]}")
    assert "v_mfma_f32_16x16x16f16" in out.stdout


def test_launch_without_amd_gpu_is_a_clear_error(gemm_func):
    if toolchain.device_present():
        pytest.skip("an AMD GPU is present")
    k = tilecore.compile(gemm_func(), target="rocm", out_idx=[-1])
    launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=k.artifact)
    arrays = [np.zeros((128, 64), np.float16), np.zeros((64, 128), np.float16), np.zeros((128, 128), np.float32)]
    with pytest.raises(tilecore.diagnostics.TileRuntimeError, match="AMD GPU|HIP runtime"):
        launch(arrays, {})


def test_unknown_target_is_a_clear_error(gemm_func):
    with pytest.raises(Exception, match="unknown ROCm target"):
        tilecore.compile(gemm_func(), target="rocm:gfx000")


def test_backend_declaration_and_toolchain_status():
    be = plugin.make_backend()
    assert be.capabilities.tiers[-1] == "compile" and "rocm:gfx942" in be.targets
    assert be.tilelang.targets == ("hip",)  # TileLang's target="hip" means this backend
    st = plugin.toolchain_status()
    assert st.ok and "ld.lld" in dict(st.details)


def test_missing_toolchain_is_one_message_with_the_install_command(monkeypatch):
    monkeypatch.setattr(toolchain, "find_lld", lambda: None)
    monkeypatch.setattr(toolchain, "find_rocm_path", lambda: None)
    st = plugin.toolchain_status()
    assert not st.ok and "ld.lld" in st.summary and "device bitcode" in st.summary
    assert st.fix.startswith("apt-get install lld-22 rocm-device-libs")


def test_a_host_without_tvm_still_names_its_gpu(monkeypatch):
    """A host that runs prebuilt kernels (a conformance bundle) needs no TVM; its report must
    still say which GPU ran them."""
    hide_distribution(monkeypatch, "apache-tvm")
    monkeypatch.setattr(toolchain, "gpu_info", lambda: "AMD Instinct MI300X (gfx942)")
    st = plugin.toolchain_status()
    assert not st.ok and "apache-tvm is not installed" in st.summary
    assert st.device == "AMD Instinct MI300X (gfx942)"
    assert dict(st.details)["gpu"] == "AMD Instinct MI300X (gfx942)"


def test_global_to_lds_copies_are_16_byte_vectors(gemm_func):
    src = tilecore.compile(gemm_func(), target="rocm:gfx942", out_idx=[-1]).artifact.source
    assert "global_load_dwordx4" in src and "ds_write_b128" in src


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
def test_rdna_targets_are_wave32_and_use_the_portable_gemm(gemm_func, arch):
    art = tilecore.compile(gemm_func(threads=128), target=f"rocm:{arch}", out_idx=[-1]).artifact
    assert art.meta["wave_size"] == 32 and "wavefront_size: 32" in art.source
    assert "v_mfma" not in art.source and elf_header(art.blobs["hsaco"])[0] == EM_AMDGPU


def test_float64_math_links_against_ocml():
    import tilecore.language as T

    @T.prim_func
    def f(A: T.Tensor((256,), "float64"), B: T.Tensor((256,), "float64")):
        with T.Kernel(1, threads=256) as bx:
            for i in T.Parallel(256):
                B[i] = T.exp(A[i]) + T.tanh(A[i])

    art = tilecore.compile(f, target="rocm").artifact
    assert art.blobs["hsaco"][:4] == b"\x7fELF"


@pytest.mark.parametrize("out", ["bfloat16", "float16"])
def test_a_float64_fragment_copied_to_a_16_bit_tensor_compiles(out):
    """The copy rounds each float64 through float32 to odd (a TIR let) and stays element by element:
    as a vector copy TVM failed with "Let cannot bind the same var to two different values"
    (conformance seed 58585's reduce program, shrunk)."""
    import tilecore.language as T

    @T.prim_func
    def main(A: T.Tensor((8, 4), "float64"), Out: T.Tensor((8,), out)):
        with T.Kernel(2, threads=128) as bx:
            A_t = T.alloc_shared((4, 4), "float64")
            R_t = T.alloc_fragment((4,), "float64")
            T.fill(R_t, -2.5)
            T.copy(A[bx * 4 : bx * 4 + 4, 0:4], A_t)
            T.reduce_sum(A_t, R_t, dim=1, clear=False)
            T.copy(R_t, Out[bx * 4])

    art = tilecore.compile(main, target="rocm").artifact
    assert art.blobs["hsaco"][:4] == b"\x7fELF"


@pytest.mark.parametrize(
    "dtype,kind,instr",
    [
        ("int32", "max", "global_atomic_smax"),
        ("float64", "add", "global_atomic_add_f64"),
        ("int64", "min", "global_atomic_smin_x2"),
        ("float16", "add", "global_atomic_cmpswap"),
    ],
)
def test_atomics_become_hardware_atomics(dtype, kind, instr):
    import tilecore.language as T

    @T.prim_func
    def hist(A: T.Tensor((256,), dtype), H: T.Tensor((16,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(256):
                if kind == "add":
                    T.atomic_add(H[i % 16], A[i])
                elif kind == "max":
                    T.atomic_max(H[i % 16], A[i])
                else:
                    T.atomic_min(H[i % 16], A[i])

    assert instr in tilecore.compile(hist, target="rocm:gfx942").artifact.source


def test_kernel_arguments_are_packed_at_the_metadata_offsets():
    import tilecore.language as T
    from tile_rocm.launcher import pack_kernargs

    n = T.dynamic("n")

    @T.prim_func
    def scale(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < n:
                    Y[bx * 256 + i] = X[bx * 256 + i] * 2.0

    meta = tilecore.compile(scale, target="rocm").artifact.meta
    assert [(a[0], a[1]) for a in meta["kernel_args"]] == [("X", "ptr"), ("Y", "ptr"), ("n", "int32")]
    buf = pack_kernargs(meta["kernel_args"], meta["kernarg_size"], {"X": 0x1000, "Y": 0x2000}, {"n": 77})
    assert len(buf) == meta["kernarg_size"]
    assert struct.unpack_from("<QQi", buf, 0) == (0x1000, 0x2000, 77)


def test_examples_compile_and_attention_runs_on_mfma():
    import importlib.util
    import pathlib

    examples = pathlib.Path(__file__).resolve().parents[3] / "examples"
    if not examples.is_dir():
        pytest.skip("examples/ not present")

    def load(name):
        spec = importlib.util.spec_from_file_location(f"tile_rocm_example_{name}", examples / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    funcs = {
        "gemm": load("gemm").matmul.prim_func(512, 512, 512),
        "softmax": load("softmax").softmax.prim_func(512, 1024),
        "layernorm": load("layernorm").layernorm.prim_func(512, 1024),
        "attention": load("flash_attention").flashattn.prim_func(1, 4, 512, 64, True, 64, 64),
    }
    for name, func in funcs.items():
        art = tilecore.compile(func, target="rocm:gfx942").artifact
        assert elf_header(art.blobs["hsaco"])[0] == EM_AMDGPU, name
    # Q K^T and P V both on matrix cores; the row max / sum of the scores use wave shuffles
    assert art.source.count("v_mfma_f32_16x16x16_f16") >= 2 and "ds_bpermute" in art.source


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_barrier_waits_for_lds_writes(arch):
    """gfx90a+ barriers do not wait for outstanding LDS writes: the barrier must be fenced."""
    import tilecore.language as T

    @T.prim_func
    def rev(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((256,), "float32")
            T.copy(A, s)
            for i in T.Parallel(256):
                B[i] = s[255 - i]

    lines = [ln.strip() for ln in tilecore.compile(rev, target=f"rocm:{arch}").artifact.source.splitlines()]
    barrier = next(i for i, ln in enumerate(lines) if ln.startswith("s_barrier"))
    write = max(i for i, ln in enumerate(lines[:barrier]) if ln.startswith(("ds_write", "ds_store")))
    waits = [ln for ln in lines[write + 1 : barrier] if ln.startswith(("s_waitcnt", "s_wait_dscnt"))]
    assert any("lgkmcnt(0)" in w or w == "s_waitcnt 0" for w in waits), lines[write : barrier + 1]


def test_compile_without_lld_names_the_fix(gemm_func, monkeypatch):
    monkeypatch.setattr(toolchain, "find_lld", lambda: None)
    with pytest.raises(Exception, match=r"ld.lld \(LLVM 22\).*Fix: apt-get install lld-22"):
        tilecore.compile(gemm_func(), target="rocm:gfx942", out_idx=[-1])


def _names_over_a_bfloat16_shared_tile(dst_dtype):
    import tilecore.language as T

    @T.prim_func
    def names(A: T.Tensor((4, 32), "float64"), C: T.Tensor((4, 32), "bfloat16"), Out: T.Tensor((4, 32), dst_dtype)):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_t = T.alloc_shared((2, 16), "float64")
            T.copy(A[by * 2 : by * 2 + 2, bx * 16 : bx * 16 + 16], A_t)
            C_t = T.alloc_shared((2, 16), "bfloat16")
            T.copy(C[by * 2 : by * 2 + 2, bx * 16 : bx * 16 + 16], C_t)
            for i, j in T.Parallel(2, 16):
                a_v = A_t[i, j]
                c_v = C_t[i, j]
                w = T.cast(c_v, "float32") * 2.0
                Out[by * 2 + i, bx * 16 + j] = T.max(T.sin(a_v), T.cast(w, "float64")) + c_v

    return names


@pytest.mark.parametrize("dst_dtype", ["float16", "float32"])
def test_names_read_from_a_bfloat16_shared_tile_compile(dst_dtype):
    # a bound value that read a bfloat16 shared tile kept referring to the tile after TVM's
    # bfloat16 legalization replaced it ("Load/Store of buffer C_t occurred before its
    # declaration", conformance 0.2.0 seed 0 program 66); names are now held in registers
    art = tilecore.compile(_names_over_a_bfloat16_shared_tile(dst_dtype), target="rocm:gfx942").artifact
    assert elf_header(art.blobs["hsaco"])[0] == EM_AMDGPU


def test_a_bfloat16_name_rounded_through_float64_compiles():
    """A bfloat16 name (held in float32) widened to float64 and rounded back: the rounding binds
    its operand with a Let, and TVM's bfloat16 legalization left the cast to bfloat16 inside it
    ("BF16 needs to be storaged lowered first"); the operand is now held in a register."""
    import tilecore.language as T

    @T.prim_func
    def k(A: T.Tensor((64,), "bfloat16"), D: T.Tensor((64,), "float64"), O: T.Tensor((2, 64), "bfloat16")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                x = A[i] * 2
                O[0, i] = T.cast(T.cast(x, "float64"), "bfloat16")
                O[1, i] = T.cast(T.cast(x, "float64") + D[i], "bfloat16")

    art = tilecore.compile(k, target="rocm:gfx942").artifact
    assert elf_header(art.blobs["hsaco"])[0] == EM_AMDGPU


def test_each_bfloat16_operation_rounds():
    """TVM computes bfloat16 in float32 and rounds only at the store, so `A * B + D` kept the
    product unrounded; the toolkit now rounds each result itself, here twice for one element per
    thread."""
    from tilecore.testing import bfloat16_mul_add_kernel

    asm = tilecore.compile(bfloat16_mul_add_kernel(), target="rocm:gfx942").artifact.source
    assert asm.count("v_mul_f32") == 1 and asm.count("v_add_f32") == 1
    # each rounding sends NaN to a quiet bfloat16 NaN (or 0x400000): one for the product, one for the sum
    assert asm.count("0x400000") == 2


def test_a_float64_select_reading_a_bfloat16_fragment_stored_to_bfloat16_compiles():
    """conformance seed 15151 program 88 (compile tier): a float64 `T.if_then_else` whose branch
    reads a bfloat16 fragment, stored to bfloat16. The store's rounding bound the value with a
    `Let`, in which TVM's legalization left the fragment's load ("Load/Store of buffer A_t occurred
    before its declaration"); the store now holds the value in a register first."""
    import tilecore.language as T

    @T.prim_func
    def k(A: T.Tensor((2, 14), "bfloat16"), C: T.Tensor((2, 14), "float64"), Out: T.Tensor((2, 14), "bfloat16")):
        with T.Kernel(2, 1, threads=64) as (bx, by):
            A_t = T.alloc_fragment((2, 8), "bfloat16")
            T.copy(A[by * 2, bx * 8], A_t)
            C_t = T.alloc_fragment((2, 8), "float64")
            T.copy(C[by * 2, bx * 8], C_t)
            for i, j in T.Parallel(2, 8):
                Out[by * 2 + i, bx * 8 + j] = T.if_then_else(C_t[i, j] > 0.5, T.cast(A_t[i, j], "float64"), C_t[i, j])

    art = tilecore.compile(k, target="rocm:gfx942").artifact
    assert elf_header(art.blobs["hsaco"])[0] == EM_AMDGPU


def test_a_per_thread_while_has_no_barrier_inside_its_loop():
    """A `while` whose condition depends on the thread is each thread's own loop: no s_barrier
    between a loop's label and its backward branch (a thread that left would never reach it);
    the barrier that orders the loop's shared stores before the next statement comes after it."""
    from tilecore.testing import per_thread_while_kernel

    source = tilecore.compile(per_thread_while_kernel(), target="rocm:gfx942").artifact.source
    lines = [ln.strip() for ln in source.splitlines()]
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if re.match(r"^\.LBB\d+_\d+:$", ln)}
    back = [
        (labels[m.group(1)], i)
        for i, ln in enumerate(lines)
        for m in [re.match(r"^s_c?branch\w* (\S+)$", ln)]
        if m and labels.get(m.group(1), i) < i
    ]
    assert back and sum(ln.startswith("s_barrier") for ln in lines) >= 2
    for start, end in back:
        assert not any(ln.startswith("s_barrier") for ln in lines[start:end]), lines[start : end + 1]
