"""`tile compile FILE::FUNC --target T --emit ir|source`."""

from __future__ import annotations

import sys

from .loading import add_kernel_arguments, kernel_from_args, traced_text, write_output


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compile",
        help="compile a kernel and print its Tile IR or generated code",
        description="Compile FILE::FUNC for a target and print the Tile IR after the pass "
        "pipeline (--emit ir) or the backend's generated code (--emit source).",
    )
    add_kernel_arguments(p)
    p.add_argument(
        "--emit",
        choices=("ir", "source"),
        default="source",
        help="ir: Tile IR after the passes, as DSL text; source: the backend's code",
    )
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..runtime import api

    func, out_idx = kernel_from_args(args)
    if args.emit == "ir":
        lowered, _ = api.lower(func, target=args.target, out_idx=out_idx)
        text = traced_text(lowered)
    else:
        kernel = api.compile(func, target=args.target, out_idx=out_idx)
        text = kernel.source
        if not text:
            text = f"# backend {kernel.backend.name!r} produced no source text for {func.name}\n"
    if args.output:
        write_output(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
