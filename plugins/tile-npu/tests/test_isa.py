"""Binary encoding, assembler and disassembler round trips; the objdump/asm CLI."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tile_npu import cli, isa
from tile_npu.isa import Instr, Program, assemble, disassemble, format_instr, parse_instr


@T.prim_func
def softmaxish(X: T.Tensor((40, 33), "float32"), Y: T.Tensor((40, 33), "float32")):
    with T.Kernel(T.ceildiv(40, 16)) as bx:
        x = T.alloc_fragment((16, 33), "float32")
        m = T.alloc_fragment((16,), "float32")
        T.copy(X[bx * 16, 0], x)
        T.reduce_max(x, m, dim=1)
        for i, j in T.Parallel(16, 33):
            x[i, j] = T.exp(x[i, j] - m[i])
        T.copy(x, Y[bx * 16, 0])


def compiled_program():
    k = tilecore.compile(softmaxish, target="npu", out_idx=[-1])
    return k, Program.from_bytes(k.artifact.blobs["program"])


def test_object_round_trips_through_bytes_and_assembly():
    k, prog = compiled_program()
    data = k.artifact.blobs["program"]
    assert prog.to_bytes() == data
    text = disassemble(prog)
    assert assemble(text).to_bytes() == data
    assert "vred.max" in text and "dma.none" in text and "vun.exp.float32" in text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(isa.OPS)), st.integers(0, 255), st.integers(0, 255), st.integers(-(2**40), 2**40))
def test_every_instruction_formats_and_parses_back(name, reg, reg2, imm):
    info = isa.OPS[name]
    ins = Instr(
        info.code,
        func=reg % max(len(info.func), 1) if info.func else 0,
        dt=(reg % 10) + 1 if info.dt else 0,
        dt2=((reg2 % 10) + 1 if info.dt2 == "dtype" else reg2 % 8 if info.dt2 == "flags" else 0),
        r=tuple(reg if j < len(info.regs) else 0 for j in range(4)),
        imm=(imm if info.imm in ("i", "d", "t") else 0),
    )
    if info.imm == "f":
        import struct

        ins.imm = struct.unpack("<q", struct.pack("<d", imm / 3.0))[0]
    back = parse_instr(format_instr(ins))
    assert back.encode() == ins.encode()
    assert Instr.decode(ins.encode()) == ins


def test_objdump_and_asm_cli(tmp_path, capsys):
    k, prog = compiled_program()
    obj = tmp_path / "k.npuo"
    obj.write_bytes(k.artifact.blobs["program"])
    assert cli.main(["objdump", str(obj)]) == 0
    text = capsys.readouterr().out
    assert text == disassemble(prog)
    src = tmp_path / "k.s"
    src.write_text(text)
    out = tmp_path / "k2.npuo"
    assert cli.main(["asm", str(src), "-o", str(out)]) == 0
    assert out.read_bytes() == obj.read_bytes()
    bad = tmp_path / "bad.npuo"
    bad.write_bytes(b"nope")
    assert cli.main(["objdump", str(bad)]) == 1
    assert "bad magic" in capsys.readouterr().err


def test_reassembled_program_still_runs():
    k, prog = compiled_program()
    from tile_npu.launcher import NPULauncher

    x = np.random.default_rng(0).standard_normal((40, 33)).astype(np.float32)
    y = np.zeros_like(x)
    NPULauncher(assemble(disassemble(prog)).to_bytes())([x, y], {})
    np.testing.assert_allclose(y, np.exp(x - x.max(axis=1, keepdims=True)), rtol=1e-6)
