"""Instruction emission: the program being built, descriptors, strings, branch patching, errors."""

from __future__ import annotations

from tilecore.diagnostics import TileCompileError
from tilecore.ir.types import promote

from .. import isa
from ..isa import Instr
from .host import NpuHost

BINOP_INDEX = {op: i for i, op in enumerate(isa.BINOPS)}
UNOP_INDEX = {op: i for i, op in enumerate(isa.UNOPS)}
COMPARES = {"<", "<=", ">", ">=", "==", "!=", "and", "or"}
ATOMIC = {"add": 1, "max": 2, "min": 3}


def prod(xs) -> int:
    """The product of `xs` as an int (1 for none)."""
    n = 1
    for x in xs:
        n *= int(x)
    return n


def binop_work_dtype(e) -> tuple:
    """(dtype the op computes in, whether it is bool arithmetic done in int32 and converted back)."""
    work = promote(e.a.dtype, e.b.dtype) if e.op in COMPARES else e.dtype
    bool_arith = work == "bool" and e.op in ("+", "-", "*", "/", "//", "%", "pow", "min", "max")
    if bool_arith:
        work = "int32"
    return work, bool_arith


class Emitter(NpuHost):
    """Appends instructions to `self.prog`, recording each one's source line for the debugger."""

    def error(self, message, span=None):
        """A TileCompileError at `span` (default: the statement being compiled), ready to raise."""
        return TileCompileError(message, span or self.cur_span, self.source)

    def emit(self, op, func=0, dt="none", dt2=0, r=(0, 0, 0, 0), imm=0) -> int:
        """Append one instruction and return its pc; the current source line is recorded for it."""
        info = isa.OPS[op]
        if isinstance(dt, str):
            dt = isa.DTYPE_CODES[dt]
        if isinstance(dt2, str):
            dt2 = isa.DTYPE_CODES[dt2]
        regs = tuple(r) + (0,) * (4 - len(r))
        pc = len(self.prog.instrs)
        self.prog.instrs.append(Instr(info.code, func, dt, dt2, regs, imm))
        if self.cur_span is not None and self.cur_span.line:
            self.lines[str(pc)] = [self.cur_span.line, self.cur_span.col]
        return pc

    def patch(self, pc, target):
        """Point the branch at `pc` to `target`."""
        self.prog.instrs[pc].imm = target

    def here(self):
        """The pc the next instruction will get."""
        return len(self.prog.instrs)

    def desc(self, d) -> int:
        """Append descriptor `d` to the program; returns its index."""
        words = d.words()
        self.prog.descs.append(words)
        return len(self.prog.descs) - 1

    def string(self, text: str) -> int:
        """Index of `text` in the program's string table (each text stored once)."""
        if text not in self.strings:
            self.strings[text] = len(self.prog.strings)
            self.prog.strings.append(text)
        return self.strings[text]
