"""ptx_fixes: the PTX rewrites (text here, with hypothesis) and that compile_cubin assembles the
rewritten PTX (nvcc here); the values they fix run on a GPU in test_conformance_regressions.py."""

import os
import re
import subprocess
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tile_cuda import compiler, toolchain
from tile_cuda.ptx_fixes import PTX_REWRITES, apply_ptx_rewrites

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")

registers = st.from_regex(r"%(rs|r|h)[0-9]{1,4}", fullmatch=True)
spaces = st.sampled_from([" ", "\t", " \t", "  "])


@given(registers, registers, spaces)
def test_a_signed_16_bit_negate_becomes_an_unsigned_subtraction_from_zero(dst, src, gap):
    for line in (f"\tneg.s16{gap}{dst}, {src};", f"\tsub.s16{gap}{dst}, 0, {src};"):
        fixed, applied = apply_ptx_rewrites(line + "\n")
        assert fixed == f"\tsub.u16{gap}{dst}, 0, {src};\n"
        assert applied == ["negate_int16_unsigned"]


@given(registers, registers, registers)
def test_other_instructions_are_left_alone(d, a, b):
    ptx = "\n".join(
        [
            f"\tsub.s16 \t{d}, {a}, {b};",  # a subtraction of a register: ptxas keeps its wrap
            f"\tsub.s16 \t{d}, 0x10, {b};",
            f"\tneg.s32 \t{d}, {a};",
            f"\tneg.s64 \t{d}, {a};",
            f"\tneg.f16 \t{d}, {a};",
            f"\tneg.ftz.f32 \t{d}, {a};",
            f"\tadd.s16 \t{d}, {a}, {b};",
            f"\tmin.s16 \t{d}, {a}, {b};",
            f"\tcvt.s32.s16 \t{d}, {a};",
        ]
    )
    assert apply_ptx_rewrites(ptx) == (ptx, [])


def test_each_rewrite_says_why():
    names = [r.name for r in PTX_REWRITES]
    assert len(set(names)) == len(names)
    assert all(r.why and r.pattern.pattern for r in PTX_REWRITES)


m = T.dynamic("m")


# conformance seed 76767, intops program 86 (the execute tier on an H100): -B of B = -32768 came out
# as +32768 inside the min, so min(~A, -B) + B was ~A + B instead of 0
@T.prim_func
def min_of_negation(A: T.Tensor((m, 76), "int16"), B: T.Tensor((m, 76), "int16"), Out: T.Tensor((m, 76), "int16")):
    with T.Kernel(3, T.ceildiv(m, 4), threads=128) as (bx, by):
        for i, j in T.Parallel(4, 32):
            if by * 4 + i < m:
                if bx * 32 + j < 76:
                    Out[by * 4 + i, bx * 32 + j] = (
                        T.min(~A[by * 4 + i, bx * 32 + j], -B[by * 4 + i, bx * 32 + j]) + B[by * 4 + i, bx * 32 + j]
                    )


def _assemble(ptx: str, arch: str = "sm_90a") -> bytes:
    """ptxas's cubin of `ptx` as is, through nvcc as compile_cubin calls it."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        gencode = f"arch=compute_{arch[3:]},code={arch}"
        subprocess.run([toolchain.find_nvcc(), "-cubin", "-gencode", gencode, "-w", "-o", out, src], check=True)
        with open(out, "rb") as f:
            return f.read()


@needs_nvcc
def test_the_kernel_that_negates_int16_is_assembled_from_the_rewritten_ptx():
    art = tilecore.compile(min_of_negation, target="cuda:sm_90a").artifact
    with tempfile.TemporaryDirectory() as d:
        raw = compiler._nvcc_ptx(toolchain.find_nvcc(), art.source, "sm_90a", d)
    assert re.search(r"neg\.s16|sub\.s16\s+%\w+,\s*0,", raw), "nvcc no longer emits the negate ptxas mishandles"
    fixed = compiler.compile_ptx(art.source, "sm_90a")
    assert not re.search(r"neg\.s16|sub\.s16\s+%\w+,\s*0,", fixed) and "sub.u16" in fixed
    assert art.blobs["cubin"] == _assemble(fixed) != _assemble(raw)


@needs_nvcc
def test_kernels_without_a_rewrite_get_the_cubin_of_nvccs_one_step_compile():
    import kernels as K

    src = tilecore.compile(K.gemm_kernel(256, 256, 128), target="cuda:sm_90a").artifact.source
    cubin = compiler.compile_cubin(src, "sm_90a")[0]
    with tempfile.TemporaryDirectory() as d:
        cu, out = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(cu, "w") as f:
            f.write(src)
        cmd = [toolchain.find_nvcc(), "-cubin", "-gencode", "arch=compute_90a,code=sm_90a", *compiler.NVCC_FLAGS]
        subprocess.run([*cmd, "-o", out, cu], check=True)
        with open(out, "rb") as f:
            assert f.read() == cubin
