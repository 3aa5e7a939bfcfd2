"""The reference NPU's instruction set: binary encoding, assembler and disassembler.

Every instruction is one little-endian 16-byte word:

    byte 0   opcode
    byte 1   func    (sub-operation: ALU op, reduce kind, SPR selector, ...)
    byte 2   dt      (dtype code of the operation / result)
    byte 3   dt2     (source dtype for conversions, or operand flags)
    byte 4-7 r0..r3  (scalar registers, scratchpad segment / vector slot numbers)
    byte 8-15 imm    (signed 64-bit: constant, branch target, descriptor index,
                      IEEE-754 float64 bits for LF)

Shapes that do not fit in a word (access patterns, DMA tiles, matrix
operands) live in the program's descriptor table; instructions name them by
index. See README.md ("Instruction set") for the full list and meaning.

A program file ("NPU object") is:

    "TNPU" u16 version u16 ncores-hint
    u32 counts: instructions, descriptors, segments, params, strings, grid_pc, kernel_pc, grid_rank
    instructions   16 bytes each
    descriptors    u16 word count + int32 words, each
    segments       u32 base, u8 dtype, u8 rank, u32 shape[rank], u8 name-length, name
    params         u8 dtype, u8 rank, u8 name-length, name
    strings        u16 length + utf-8 (T.print messages)
    debug          u32 length + JSON (pc -> source line, file, source text): not needed to run
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Type, Union

from tilecore.ir.nodes import MATH_FUNCS

MAGIC = b"TNPU"
FORMAT_VERSION = 1
NO_REG = 255  # "no register / no mask" in a register field

# ----------------------------------------------------------------------------- dtypes

DTYPE_CODES = {
    "none": 0,
    "bool": 1,
    "int8": 2,
    "uint8": 3,
    "int16": 4,
    "int32": 5,
    "int64": 6,
    "float16": 7,
    "bfloat16": 8,
    "float32": 9,
    "float64": 10,
    "float8_e4m3fn": 11,
    "float8_e5m2": 12,
}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}

# ----------------------------------------------------------------------------- sub-operations

BINOPS = (
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "min",
    "max",
    "pow",
    "&",
    "|",
    "^",
    "<<",
    ">>",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "and",
    "or",
)
BINOP_NAMES = (
    "add",
    "sub",
    "mul",
    "div",
    "fdiv",
    "mod",
    "min",
    "max",
    "pow",
    "and",
    "or",
    "xor",
    "shl",
    "shr",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "land",
    "lor",
)
# opcode order: the four register operations, then the language's math functions in their order
UNOPS = ("mov", "neg", "not", "~") + MATH_FUNCS
# math functions that take the vector unit four times as long (the others are bit operations)
TRANSCENDENTAL = tuple(f for f in MATH_FUNCS if f not in ("floor", "ceil", "abs"))
UNOP_NAMES = (
    "mov",
    "neg",
    "lnot",
    "bnot",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "sin",
    "cos",
    "floor",
    "ceil",
    "abs",
)
REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")
ATOMIC_KINDS = ("none", "add", "max", "min")
SPR_KINDS = ("block", "nblocks", "dyn", "core")  # SPR rd, kind, imm=index

# flags in dt2 for vector ALU ops: operand k is a scalar register broadcast to all lanes
FLAG_SCALAR = (1, 2, 4)

# ----------------------------------------------------------------------------- opcodes
# name -> (code, unit, operand schema). Schema letters per field:
#   r = scalar register, s = vector slot / segment, m = mask slot (255 = none),
#   d = descriptor index (imm), t = branch target (imm), i = integer imm, f = float imm


@dataclass(frozen=True)
class OpInfo:
    name: str
    code: int
    unit: str  # scalar | vector | matrix | dma
    regs: str  # schema of r0..r3, e.g. "rrr"
    imm: str = ""  # "", "i", "f", "d", "t"
    func: Tuple[str, ...] = ()  # names of func values (empty: func unused)
    dt: bool = False
    dt2: str = ""  # "", "dtype", "flags"


OPS: Dict[str, OpInfo] = {}


def _op(name, code, unit, regs="", imm="", func=(), dt=False, dt2=""):
    OPS[name] = OpInfo(name, code, unit, regs, imm, tuple(func), dt, dt2)


_op("nop", 0x00, "scalar")
_op("halt", 0x01, "scalar")
_op("li", 0x02, "scalar", "r", "i")
_op("lf", 0x03, "scalar", "r", "f")
_op("mov", 0x04, "scalar", "rr")
_op("sop", 0x05, "scalar", "rrr", func=BINOP_NAMES, dt=True)
_op("sun", 0x06, "scalar", "rr", func=UNOP_NAMES, dt=True)
_op("scvt", 0x07, "scalar", "rr", dt=True)
_op("ssel", 0x08, "scalar", "rrrr", dt=True)
_op("spr", 0x09, "scalar", "r", "i", func=SPR_KINDS)
_op("sld", 0x0A, "scalar", "r", "d")
_op("sst", 0x0B, "scalar", "r", "d", dt=True)
_op("satom", 0x0C, "scalar", "r", "d", func=ATOMIC_KINDS, dt=True)
_op("br", 0x0D, "scalar", "", "t")
_op("bz", 0x0E, "scalar", "r", "t")
_op("bnz", 0x0F, "scalar", "r", "t")
_op("print", 0x10, "scalar", "r", "i", dt=True)  # scalar register, imm = message string
_op("printt", 0x11, "scalar", "", "d", dt2="flags")  # print a tile; flags = message string + 1
_op("setvl", 0x12, "scalar", "rr")  # VL <- r0, VSTART <- r1
_op("viota", 0x20, "vector", "s", "d", func=tuple(f"d{i}" for i in range(8)))
_op("vbin", 0x21, "vector", "sss", func=BINOP_NAMES, dt=True, dt2="flags")
_op("vun", 0x22, "vector", "ss", func=UNOP_NAMES, dt=True, dt2="flags")
_op("vcvt", 0x23, "vector", "ss", dt=True, dt2="dtype")
_op("vsel", 0x24, "vector", "ssss", dt=True, dt2="flags")
_op("vld", 0x25, "vector", "sm", "d")
_op("vst", 0x26, "vector", "sm", "d", dt=True)
_op("vatom", 0x27, "vector", "sm", "d", func=ATOMIC_KINDS, dt=True)
_op("vtile", 0x28, "vector", "r", "d", func=("move", "fill"))
_op("vred", 0x29, "vector", "", "d", func=REDUCE_KINDS, dt2="flags")  # flags bit0: clear
_op("vscan", 0x2A, "vector", "", "d", dt2="flags")  # flags bit0: reverse
_op("vprint", 0x2B, "vector", "sm", "d", dt=True, dt2="flags")  # flags = message string + 1
_op("mma", 0x30, "matrix", "", "d", dt2="flags")  # flags bit0: clear accum
_op("dma", 0x40, "dma", "rr", "d", func=ATOMIC_KINDS)  # r0 <- token, r1 fill value
_op("wait", 0x41, "dma", "r")

OPS_BY_CODE = {info.code: info for info in OPS.values()}

# ----------------------------------------------------------------------------- descriptors
# Descriptors are int32 lists whose first word is the kind.
D_ACCESS, D_TILE, D_RED, D_MMA, D_DMA, D_EXT = 1, 2, 3, 4, 5, 6
DESC_NAMES = {D_ACCESS: "access", D_TILE: "tile", D_RED: "red", D_MMA: "mma", D_DMA: "dma", D_EXT: "ext"}
SPACE_SEG, SPACE_PARAM = 0, 1


@dataclass(frozen=True)
class Access:
    """An access pattern: element e of an iteration space reads/writes one element of a space.

    space: SPACE_SEG (scratchpad segment) or SPACE_PARAM (a DRAM tensor).
    extents: the iteration space (row-major flattening gives element e).
    dims: one (base register, vector slot or NO_REG, coefficients) per dimension of the
    space: coordinate = reg[base] + sum(coeff[d] * index[d]) + slot[e].
    """

    space: int
    space_id: int
    extents: Tuple[int, ...]
    dims: Tuple[Tuple[int, int, Tuple[int, ...]], ...]

    def words(self) -> List[int]:
        out = [D_ACCESS, self.space, self.space_id, len(self.dims), len(self.extents), *self.extents]
        for base, slot, coeffs in self.dims:
            out += [base, slot, *coeffs]
        return out

    @staticmethod
    def from_words(w: Sequence[int]) -> "Access":
        space, sid, rank, n = w[1], w[2], w[3], w[4]
        ext = tuple(w[5 : 5 + n])
        pos = 5 + n
        dims = []
        for _ in range(rank):
            dims.append((w[pos], w[pos + 1], tuple(w[pos + 2 : pos + 2 + n])))
            pos += 2 + n
        return Access(space, sid, ext, tuple(dims))


@dataclass(frozen=True)
class Reduction:
    """Reduce or scan a segment viewed as (outer, length, inner) along the middle axis."""

    src_seg: int
    src_off: int  # register holding the element offset of the source
    dst_seg: int
    dst_off: int
    outer: int
    length: int
    inner: int

    def words(self):
        return [D_RED, self.src_seg, self.src_off, self.dst_seg, self.dst_off, self.outer, self.length, self.inner]

    @staticmethod
    def from_words(w):
        return Reduction(*w[1:8])


@dataclass(frozen=True)
class MatMul:
    """One matrix-engine operation C[m,n] (+)= op(A) @ op(B) with leading dimensions."""

    a_seg: int
    a_off: int
    lda: int
    b_seg: int
    b_off: int
    ldb: int
    c_seg: int
    c_off: int
    ldc: int
    m: int
    n: int
    k: int
    trans_a: int
    trans_b: int

    def words(self):
        return [
            D_MMA,
            self.a_seg,
            self.a_off,
            self.lda,
            self.b_seg,
            self.b_off,
            self.ldb,
            self.c_seg,
            self.c_off,
            self.ldc,
            self.m,
            self.n,
            self.k,
            self.trans_a,
            self.trans_b,
        ]

    @staticmethod
    def from_words(w):
        return MatMul(*w[1:15])


@dataclass(frozen=True)
class Transfer:
    """A tile transfer (DMA or vtile): source and destination access descriptors (-1: fill)."""

    src: int
    dst: int

    def words(self):
        return [D_DMA, self.src, self.dst]

    @staticmethod
    def from_words(w):
        return Transfer(w[1], w[2])


@dataclass(frozen=True)
class Extents:
    extents: Tuple[int, ...]

    def words(self):
        return [D_EXT, len(self.extents), *self.extents]

    @staticmethod
    def from_words(w):
        return Extents(tuple(w[2 : 2 + w[1]]))


_DESC_CLASSES: Dict[int, Type[Union[Access, Reduction, MatMul, Transfer, Extents]]] = {
    D_ACCESS: Access,
    D_RED: Reduction,
    D_MMA: MatMul,
    D_DMA: Transfer,
    D_EXT: Extents,
}


def decode_desc(words: Sequence[int]):
    """The descriptor object for a word list (ValueError for an unknown kind)."""
    cls = _DESC_CLASSES.get(words[0] if words else -1)
    if cls is None:
        raise ValueError(f"unknown descriptor kind {words[0] if words else None}")
    return cls.from_words(list(words))


# ----------------------------------------------------------------------------- program


@dataclass
class Instr:
    op: int
    func: int = 0
    dt: int = 0
    dt2: int = 0
    r: Tuple[int, int, int, int] = (0, 0, 0, 0)
    imm: int = 0

    def encode(self) -> bytes:
        return struct.pack("<8Bq", self.op, self.func, self.dt, self.dt2, *self.r, self.imm)

    @staticmethod
    def decode(word: bytes) -> "Instr":
        v = struct.unpack("<8Bq", word)
        return Instr(v[0], v[1], v[2], v[3], tuple(v[4:8]), v[8])


@dataclass
class Segment:
    """A named scratchpad region: buffer allocation (typed, shaped) or vector slot (dtype none)."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    base: int

    @property
    def nbytes(self) -> int:
        from .arch import dtype_size

        n = 1
        for s in self.shape:
            n *= s
        return n * (dtype_size(self.dtype) if self.dtype != "none" else 1)


@dataclass
class Param:
    name: str
    dtype: str
    rank: int


@dataclass
class Program:
    """An NPU program: code, descriptors, segment and parameter tables, debug info."""

    instrs: List[Instr] = field(default_factory=list)
    descs: List[List[int]] = field(default_factory=list)
    segments: List[Segment] = field(default_factory=list)
    params: List[Param] = field(default_factory=list)
    strings: List[str] = field(default_factory=list)
    grid_pc: int = 0
    kernel_pc: int = 0
    grid_rank: int = 1
    ncores: int = 0
    debug: Dict = field(default_factory=dict)  # {"file":..., "lines": {pc: [line, col]}, "source": ...}

    # -- binary form

    def to_bytes(self) -> bytes:
        out = bytearray(MAGIC)
        out += struct.pack("<HH", FORMAT_VERSION, self.ncores)
        out += struct.pack(
            "<8I",
            len(self.instrs),
            len(self.descs),
            len(self.segments),
            len(self.params),
            len(self.strings),
            self.grid_pc,
            self.kernel_pc,
            self.grid_rank,
        )
        for ins in self.instrs:
            out += ins.encode()
        for d in self.descs:
            out += struct.pack("<H", len(d)) + struct.pack(f"<{len(d)}i", *d)
        for s in self.segments:
            name = s.name.encode()[:255]
            out += struct.pack("<IBB", s.base, DTYPE_CODES[s.dtype], len(s.shape))
            out += struct.pack(f"<{len(s.shape)}I", *s.shape)
            out += struct.pack("<B", len(name)) + name
        for p in self.params:
            name = p.name.encode()[:255]
            out += struct.pack("<BBB", DTYPE_CODES[p.dtype], p.rank, len(name)) + name
        for text in self.strings:
            b = text.encode()[:65535]
            out += struct.pack("<H", len(b)) + b
        dbg = json.dumps(self.debug, sort_keys=True).encode()
        out += struct.pack("<I", len(dbg)) + dbg
        return bytes(out)

    @staticmethod
    def from_bytes(data: bytes) -> "Program":
        """Parse an NPU object (ValueError with the reason when it is malformed)."""
        try:
            return _parse(data)
        except (struct.error, UnicodeDecodeError, json.JSONDecodeError, KeyError, IndexError) as e:
            raise ValueError(f"malformed NPU object: {e}") from None

    # -- helpers for the compiler

    def desc(self, index: int):
        return decode_desc(self.descs[index])


def _parse(data: bytes) -> Program:
    if data[:4] != MAGIC:
        raise ValueError("not an NPU object (bad magic)")
    version, ncores = struct.unpack_from("<HH", data, 4)
    if version != FORMAT_VERSION:
        raise ValueError(f"NPU object format {version}, this simulator reads {FORMAT_VERSION}")
    (n_ins, n_desc, n_seg, n_par, n_str, grid_pc, kernel_pc, grid_rank) = struct.unpack_from("<8I", data, 8)
    pos = 40
    prog = Program(grid_pc=grid_pc, kernel_pc=kernel_pc, grid_rank=grid_rank, ncores=ncores)
    for _ in range(n_ins):
        prog.instrs.append(Instr.decode(data[pos : pos + 16]))
        pos += 16
    for _ in range(n_desc):
        (n,) = struct.unpack_from("<H", data, pos)
        prog.descs.append(list(struct.unpack_from(f"<{n}i", data, pos + 2)))
        pos += 2 + 4 * n
    for _ in range(n_seg):
        base, dt, rank = struct.unpack_from("<IBB", data, pos)
        pos += 6
        shape = struct.unpack_from(f"<{rank}I", data, pos)
        pos += 4 * rank
        (ln,) = struct.unpack_from("<B", data, pos)
        name = data[pos + 1 : pos + 1 + ln].decode()
        pos += 1 + ln
        prog.segments.append(Segment(name, DTYPE_NAMES[dt], tuple(shape), base))
    for _ in range(n_par):
        dt, rank, ln = struct.unpack_from("<BBB", data, pos)
        name = data[pos + 3 : pos + 3 + ln].decode()
        pos += 3 + ln
        prog.params.append(Param(name, DTYPE_NAMES[dt], rank))
    for _ in range(n_str):
        (ln,) = struct.unpack_from("<H", data, pos)
        prog.strings.append(data[pos + 2 : pos + 2 + ln].decode())
        pos += 2 + ln
    (ln,) = struct.unpack_from("<I", data, pos)
    prog.debug = json.loads(data[pos + 4 : pos + 4 + ln].decode()) if ln else {}
    return prog


# ----------------------------------------------------------------------------- disassembler


def format_instr(ins: Instr, pc: Optional[int] = None) -> str:
    """One instruction as assembly text (the assembler reads it back)."""
    info = OPS_BY_CODE.get(ins.op)
    if info is None:
        return f".word {ins.encode().hex()}"
    name = info.name
    if info.func:
        name += "." + (info.func[ins.func] if ins.func < len(info.func) and info.func[ins.func] else str(ins.func))
    if info.dt:
        name += "." + DTYPE_NAMES.get(ins.dt, str(ins.dt))
    if info.dt2 == "dtype":
        name += "." + DTYPE_NAMES.get(ins.dt2, str(ins.dt2))
    ops = []
    for letter, value in zip(info.regs, ins.r):
        if letter == "r":
            ops.append(f"r{value}")
        elif letter == "s":
            ops.append(f"v{value}")
        elif letter == "m":
            ops.append("-" if value == NO_REG else f"v{value}")
    if info.imm == "i":
        ops.append(f"#{ins.imm}")
    elif info.imm == "f":
        ops.append("#" + repr(struct.unpack("<d", struct.pack("<q", ins.imm))[0]))
    elif info.imm == "d":
        ops.append(f"d{ins.imm}")
    elif info.imm == "t":
        ops.append(f"@{ins.imm}")
    if info.dt2 == "flags" and ins.dt2:
        ops.append(f"flags={ins.dt2}")
    return f"{name} {', '.join(ops)}".rstrip()


def disassemble(prog: Program, with_comments: bool = True) -> str:
    """The whole program as assembly text; `assemble(disassemble(p))` rebuilds `p`'s bytes."""
    lines = [
        f"; tile-npu object, format {FORMAT_VERSION}",
        f".ncores {prog.ncores}",
        f".grid {prog.grid_pc} {prog.grid_rank}",
        f".kernel {prog.kernel_pc}",
    ]
    for p in prog.params:
        lines.append(f".param {p.name} {p.dtype} {p.rank}")
    for i, s in enumerate(prog.segments):
        lines.append(f".segment v{i} {s.name} {s.dtype} {'x'.join(map(str, s.shape)) or '1'} @{s.base:#x}")
    for i, text in enumerate(prog.strings):
        lines.append(f".string {i} {json.dumps(text)}")
    for i, d in enumerate(prog.descs):
        comment = ""
        if with_comments:
            try:
                comment = f"    ; {_describe(decode_desc(d), prog)}"
            except Exception:  # noqa: BLE001 - a corrupt descriptor still disassembles
                comment = "    ; (unknown descriptor)"
        lines.append(f".desc d{i} {' '.join(map(str, d))}{comment}")
    src_lines = prog.debug.get("lines", {})
    for pc, ins in enumerate(prog.instrs):
        label = ""
        if pc == prog.grid_pc:
            label = "grid:"
        if pc == prog.kernel_pc:
            label = "kernel:"
        if label:
            lines.append(label)
        text = f"  {pc:5d}: {format_instr(ins)}"
        if with_comments and str(pc) in src_lines:
            text = f"{text:<56} ; line {src_lines[str(pc)][0]}"
        lines.append(text)
    if prog.debug:
        lines.append(".debug " + json.dumps(prog.debug, sort_keys=True))
    return "\n".join(lines) + "\n"


def _describe(d, prog: Program) -> str:
    if isinstance(d, Access):
        where = (
            prog.segments[d.space_id].name
            if d.space == SPACE_SEG and d.space_id < len(prog.segments)
            else prog.params[d.space_id].name
            if d.space == SPACE_PARAM and d.space_id < len(prog.params)
            else "?"
        )
        idx = []
        for base, slot, coeffs in d.dims:
            terms = [f"r{base}"] + [f"{c}*i{k}" for k, c in enumerate(coeffs) if c]
            if slot != NO_REG:
                terms.append(f"v{slot}[e]")
            idx.append("+".join(terms))
        return f"{where}[{', '.join(idx)}] over {list(d.extents)}"
    if isinstance(d, MatMul):
        return (
            f"C=v{d.c_seg}+r{d.c_off} ({d.m}x{d.n}) += A=v{d.a_seg}+r{d.a_off}{'^T' if d.trans_a else ''}"
            f" @ B=v{d.b_seg}+r{d.b_off}{'^T' if d.trans_b else ''}, k={d.k}"
        )
    if isinstance(d, Reduction):
        return f"v{d.src_seg} ({d.outer},{d.length},{d.inner}) -> v{d.dst_seg}"
    if isinstance(d, Transfer):
        return f"d{d.src} -> d{d.dst}" if d.src >= 0 else f"fill -> d{d.dst}"
    if isinstance(d, Extents):
        return f"extents {list(d.extents)}"
    return ""


# ----------------------------------------------------------------------------- assembler

_LINE = re.compile(r"^\s*(?:(\d+):)?\s*(.*?)\s*$")


class AsmError(ValueError):
    """A line of assembly text that does not parse."""


def parse_instr(text: str) -> Instr:
    """One instruction from assembly text (as `format_instr` writes it)."""
    text = text.strip()
    if text.startswith(".word"):
        return Instr.decode(bytes.fromhex(text.split()[1]))
    head, _, rest = text.partition(" ")
    parts = head.split(".")
    info = OPS.get(parts[0])
    if info is None:
        raise AsmError(f"unknown mnemonic {parts[0]!r}")
    ins = Instr(info.code)
    k = 1
    if info.func:
        tok = parts[k] if k < len(parts) else ""
        ins.func = info.func.index(tok) if tok in info.func else int(tok)
        k += 1
    if info.dt:
        ins.dt = DTYPE_CODES[parts[k]]
        k += 1
    if info.dt2 == "dtype":
        ins.dt2 = DTYPE_CODES[parts[k]]
        k += 1
    ops = [o.strip() for o in rest.split(",") if o.strip()]
    regs = [0, 0, 0, 0]
    oi = 0
    for j, _letter in enumerate(info.regs):
        tok = ops[oi]
        oi += 1
        regs[j] = NO_REG if tok == "-" else int(tok[1:])
    ins.r = (regs[0], regs[1], regs[2], regs[3])
    if info.imm:
        tok = ops[oi]
        oi += 1
        if info.imm == "f":
            ins.imm = struct.unpack("<q", struct.pack("<d", float(tok[1:])))[0]
        else:
            ins.imm = int(tok[1:])
    for tok in ops[oi:]:
        if tok.startswith("flags="):
            ins.dt2 = int(tok[6:])
        else:
            raise AsmError(f"unexpected operand {tok!r} in {text!r}")
    return ins


def assemble(text: str) -> Program:
    """Build a Program from assembly text (directives plus one instruction per line)."""
    prog = Program()
    seg_list: Dict[int, Segment] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = (
            raw.split(";", 1)[0].strip()
            if not raw.lstrip().startswith(".debug") and not raw.lstrip().startswith(".string")
            else raw.strip()
        )
        if not line or line.endswith(":") and not line[:-1].strip().isdigit():
            continue
        try:
            if line.startswith(".ncores"):
                prog.ncores = int(line.split()[1])
            elif line.startswith(".grid"):
                _, pc, rank = line.split()
                prog.grid_pc, prog.grid_rank = int(pc), int(rank)
            elif line.startswith(".kernel"):
                prog.kernel_pc = int(line.split()[1])
            elif line.startswith(".param"):
                _, name, dt, rank = line.split()
                prog.params.append(Param(name, dt, int(rank)))
            elif line.startswith(".segment"):
                _, idx, name, dt, shape, base = line.split()
                seg_list[int(idx[1:])] = Segment(name, dt, tuple(int(x) for x in shape.split("x")), int(base[1:], 0))
            elif line.startswith(".string"):
                _, idx, rest = line.split(" ", 2)
                prog.strings.append(json.loads(rest))
            elif line.startswith(".desc"):
                words = line.split()[2:]
                prog.descs.append([int(w) for w in words])
            elif line.startswith(".debug"):
                prog.debug = json.loads(line[len(".debug") :].strip())
            else:
                m = _LINE.match(line)
                if m is None:  # never: the pattern matches any line
                    raise ValueError("not an instruction")
                prog.instrs.append(parse_instr(m.group(2)))
        except (ValueError, IndexError, KeyError) as e:
            raise AsmError(f"line {lineno}: cannot assemble {raw.strip()!r}: {e}") from None
    prog.segments = [seg_list[i] for i in sorted(seg_list)]
    return prog
