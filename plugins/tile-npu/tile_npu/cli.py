"""`tile-npu`: objdump, asm and compile for the reference NPU's object files (.npuo).

tile-npu compile FILE::FUNC [ARGS...] [--arg k=v] -o out.npuo   Tile IR -> NPU object
tile-npu objdump out.npuo [--no-comments]                       NPU object -> assembly text
tile-npu asm prog.s -o out.npuo                                 assembly text -> NPU object
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .isa import AsmError, Program, assemble, disassemble


def _objdump(args) -> int:
    with open(args.file, "rb") as f:
        data = f.read()
    try:
        prog = Program.from_bytes(data)
    except ValueError as e:
        print(f"tile-npu objdump: {args.file}: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(disassemble(prog, with_comments=not args.no_comments))
    return 0


def _asm(args) -> int:
    with open(args.file) as f:
        text = f.read()
    try:
        prog = assemble(text)
    except AsmError as e:
        print(f"tile-npu asm: {args.file}: {e}", file=sys.stderr)
        return 1
    with open(args.output, "wb") as f:
        f.write(prog.to_bytes())
    print(f"wrote {args.output}: {len(prog.instrs)} instructions, {len(prog.descs)} descriptors")
    return 0


def _compile(args) -> int:
    from tilecore.cli.loading import kernel_from_args
    from tilecore.diagnostics import TileError
    from tilecore.runtime import api

    args.target = "npu"
    try:
        func, out_idx = kernel_from_args(args)
        kernel = api.compile(func, target="npu", out_idx=out_idx)
    except TileError as e:
        print(str(e), file=sys.stderr)
        return 1
    with open(args.output, "wb") as f:
        f.write(kernel.artifact.blobs["program"])
    print(f"wrote {args.output} ({kernel.artifact.meta.get('instructions')} instructions)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tile-npu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("objdump", help="disassemble an NPU object")
    p.add_argument("file")
    p.add_argument("--no-comments", action="store_true", help="omit descriptor and source-line comments")
    p.set_defaults(func=_objdump)
    p = sub.add_parser("asm", help="assemble NPU assembly text into an object")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=_asm)
    p = sub.add_parser("compile", help="compile a kernel to an NPU object")
    p.add_argument("kernel", metavar="FILE::FUNC")
    p.add_argument("factory_args", nargs="*", metavar="ARG")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=_compile)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
