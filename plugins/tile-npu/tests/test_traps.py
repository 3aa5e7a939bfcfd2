"""Every simulator trap, provoked by a deliberately bad program or a corrupted binary."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tile_npu import isa
from tile_npu.arch import NPUConfig
from tile_npu.isa import Program, assemble
from tile_npu.launcher import NPULauncher
from tile_npu.simulator import NPUTrap, Simulator
from tilecore.diagnostics import TileRuntimeError


def gemm_kernel():
    M = N = K = 64

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((M, 32), "float16")
            B_s = T.alloc_shared((32, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(2, num_stages=1):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])

    return tilecore.compile(gemm, target="npu", out_idx=[-1])


def run_program(prog: Program):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    NPULauncher(prog.to_bytes())([a, b, c], {})
    return a, b, c


def test_unmodified_binary_runs():
    k = gemm_kernel()
    a, b, c = run_program(Program.from_bytes(k.artifact.blobs["program"]))
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_removing_the_dma_waits_traps_as_a_race():
    prog = Program.from_bytes(gemm_kernel().artifact.blobs["program"])
    waits = [i for i, ins in enumerate(prog.instrs) if ins.op == isa.OPS["wait"].code]
    assert waits
    for i in waits:
        prog.instrs[i] = isa.Instr(isa.OPS["nop"].code)
    with pytest.raises(NPUTrap) as ei:
        run_program(prog)
    assert ei.value.kind == "dma_race"
    assert "wait" in str(ei.value) and "A_s" in str(ei.value)
    assert ei.value.span is not None and ei.value.span.line > 0  # points at the user's T.gemm line


def test_misaligned_dma_traps():
    prog = Program.from_bytes(gemm_kernel().artifact.blobs["program"])
    seg = next(s for s in prog.segments if s.name == "A_s")
    seg.base += 2  # still 2-byte aligned for float16, not 32-byte aligned for DMA
    with pytest.raises(NPUTrap) as ei:
        run_program(prog)
    assert ei.value.kind == "misaligned_dma"
    assert "A_s" in str(ei.value)


def test_segment_beyond_the_scratchpad_traps_as_overflow():
    prog = Program.from_bytes(gemm_kernel().artifact.blobs["program"])
    seg = next(s for s in prog.segments if s.name == "C_f")
    seg.base = NPUConfig().scratchpad_bytes - 1024  # 16 KiB segment hanging off the end
    with pytest.raises(NPUTrap) as ei:
        run_program(prog)
    assert ei.value.kind == "scratchpad_overflow"
    assert "C_f" in str(ei.value)


def test_corrupted_opcode_traps_as_illegal_instruction():
    data = bytearray(gemm_kernel().artifact.blobs["program"])
    prog = Program.from_bytes(bytes(data))
    prog.instrs[prog.kernel_pc + 1].op = 0xEE
    with pytest.raises(NPUTrap) as ei:
        run_program(prog)
    assert ei.value.kind == "illegal_instruction" and "0xee" in str(ei.value)


def test_truncated_object_is_a_clear_load_error():
    data = gemm_kernel().artifact.blobs["program"]
    with pytest.raises(TileRuntimeError, match="malformed NPU object"):
        NPULauncher(data[:100])
    with pytest.raises(TileRuntimeError, match="bad magic"):
        NPULauncher(b"ELF!" + data[4:])


HAND_WRITTEN = """
.ncores 1
.grid 0 1
.kernel 2
.param X float32 1
.param Y float32 1
.segment v0 buf float32 64 @0x0
.segment v1 slot none 4096 @0x1000
.desc d0 1 1 0 1 1 64 255 255 1
.desc d1 1 0 0 1 1 64 255 255 1
.desc d2 5 0 1
.desc d3 1 1 1 1 1 64 255 255 1
  li r0, #1
  halt
  li r0, #0
  dma.none r8, r0, d2
  {wait}
  li r9, #64
  li r10, #0
  setvl r9, r10
  vld v1, -, d1
  vst.float32 v1, -, d3
  halt
"""


def test_hand_written_program_with_and_without_wait():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    good = assemble(HAND_WRITTEN.format(wait="wait r8"))
    rep = Simulator(good).run([x, y])
    np.testing.assert_array_equal(y, x)
    assert rep.cycles > NPUConfig().dma_latency  # the wait stalled for the DMA
    bad = assemble(HAND_WRITTEN.format(wait="nop"))
    with pytest.raises(NPUTrap) as ei:
        Simulator(bad).run([x, np.zeros(64, np.float32)])
    assert ei.value.kind == "dma_race" and ei.value.pc == 8  # the vld


def test_unwaited_dma_at_block_end_traps():
    text = HAND_WRITTEN.format(wait="nop").replace("  vld v1, -, d1\n  vst.float32 v1, -, d3\n", "")
    with pytest.raises(NPUTrap) as ei:
        Simulator(assemble(text)).run([np.zeros(64, np.float32), np.zeros(64, np.float32)])
    assert ei.value.kind == "dma_race" and "never waited" in str(ei.value)


def test_runaway_program_traps():
    text = ".ncores 1\n.grid 0 1\n.kernel 2\n  li r0, #1\n  halt\n  br @2\n"
    with pytest.raises(NPUTrap) as ei:
        Simulator(assemble(text), max_steps=1000).run([])
    assert ei.value.kind == "runaway"


def test_out_of_bounds_element_index_is_a_runtime_error_at_the_line():
    @T.prim_func
    def oob(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i + 5]

    k = tilecore.compile(oob, target="npu", out_idx=[-1])
    with pytest.raises(TileRuntimeError) as ei:
        k(np.zeros(8, np.float32))
    assert "outside X" in str(ei.value) and "Y[i] = X[i + 5]" in str(ei.value)


def test_launch_budget_stops_a_loop_that_does_not_end(monkeypatch):
    """Issue 16: the simulator had no step budget (a launch ran past 150 s)."""
    monkeypatch.setenv("TILE_NPU_MAX_STEPS", "20000")

    @T.prim_func
    def spin(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_var("int32")
            acc = 0
            for k in T.serial(1000000):
                acc = acc + X[k % 8]
            Y[0] = acc

    kernel = tilecore.compile(spin, target="npu", out_idx=[-1])
    with pytest.raises(NPUTrap) as ei:
        kernel(np.ones(8, np.int32))
    assert ei.value.kind == "runaway" and "more than 20000 instructions" in str(ei.value)
    assert "TILE_NPU_MAX_STEPS" in str(ei.value)


def test_grid_beyond_the_budget_is_refused_before_running(monkeypatch):
    monkeypatch.setenv("TILE_NPU_MAX_STEPS", "1000")
    M = T.dynamic("M")

    @T.prim_func
    def per_element(X: T.Tensor((M,), "int32"), Y: T.Tensor((M,), "int32")):
        with T.Kernel(M) as bx:
            Y[bx] = X[bx]

    kernel = tilecore.compile(per_element, target="npu")
    with pytest.raises(TileRuntimeError, match=r"grid \(5000,\) has 5000 blocks.*budget of 1000"):
        kernel(np.ones(5000, np.int32), np.zeros(5000, np.int32))
