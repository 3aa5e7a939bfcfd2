"""Finding a kernel named `FILE::FUNC` on the command line and building its PrimFunc."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Dict, List, Tuple

from ..diagnostics import TileError


class CommandLineError(TileError):
    """A bad `FILE::FUNC` reference or factory argument."""


def parse_value(text: str) -> Any:
    """A Python literal (`128`, `'float16'`, `(1, 2)`, `True`), else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_factory_args(positional: List[str], named: List[str]) -> Tuple[list, Dict[str, Any]]:
    """Positional values and `name=value` pairs, each parsed with `parse_value`."""
    args = [parse_value(v) for v in positional]
    kwargs: Dict[str, Any] = {}
    for item in named or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise CommandLineError(f"--arg expects name=value, got {item!r}")
        kwargs[name.strip()] = parse_value(value)
    return args, kwargs


@contextlib.contextmanager
def neighbours_importable(folder: str):
    """Put `folder` first on sys.path while a file of it runs, so that it can import the modules
    beside it; taken off again afterwards, because processes started later (conformance and
    autotune workers) inherit sys.path, where a stray `typing.py` in that folder would shadow
    the standard library."""
    added = bool(folder) and folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def load_object(ref: str):
    """Import the file of `FILE::NAME` as a module and return its attribute NAME."""
    path, sep, name = ref.rpartition("::")
    if not sep or not path or not name:
        raise CommandLineError(f"expected FILE::FUNC (e.g. examples/gemm.py::matmul), got {ref!r}")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise CommandLineError(f"no such file: {path}")
    stem = os.path.splitext(os.path.basename(path))[0]
    module_name = f"_tile_cli_{stem}_{hashlib.sha1(path.encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CommandLineError(f"cannot import {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with neighbours_importable(os.path.dirname(path)):
        spec.loader.exec_module(module)  # TileErrors from parsing kernels propagate as they are
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in vars(module) if not n.startswith("_"))
            raise CommandLineError(f"{path} has no {name!r}; it defines: {', '.join(names)}")
        obj = getattr(obj, part)
    return obj


def build_prim_func(obj, args: list, kwargs: Dict[str, Any], ref: str = ""):
    """The PrimFunc that `obj` (a PrimFunc, jit factory or plain factory) gives for these arguments."""
    from ..ir.nodes import PrimFunc
    from ..runtime.api import JITFunction, LazyKernel

    if isinstance(obj, PrimFunc):
        if args or kwargs:
            raise CommandLineError(f"{ref} is a prim_func; it takes no factory arguments")
        return obj
    if isinstance(obj, LazyKernel):
        return obj.func
    if isinstance(obj, JITFunction):
        _check_factory_arguments(obj.factory, args, kwargs, ref)
        return obj.prim_func(*args, **kwargs)
    if callable(obj):
        _check_factory_arguments(obj, args, kwargs, ref)
        result = obj(*args, **kwargs)
        if isinstance(result, PrimFunc):
            return result
        raise CommandLineError(f"{ref} returned {type(result).__name__}, not a @T.prim_func")
    raise CommandLineError(f"{ref} is a {type(obj).__name__}, not a prim_func or kernel factory")


def _check_factory_arguments(factory, args: list, kwargs: Dict[str, Any], ref: str) -> None:
    """A CommandLineError showing the factory's signature when the arguments do not fit it.

    Checked before the call, so a TypeError raised inside the factory is not
    mistaken for a bad command line (and keeps its own traceback).
    """
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable: let the call itself complain
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        given = " ".join([repr(a) for a in args] + [f"--arg {k}={v!r}" for k, v in kwargs.items()])
        raise CommandLineError(
            f"{ref}: {err} (given: {given or 'no arguments'}); it is "
            f"{getattr(factory, '__name__', 'the factory')}{signature}: pass positional arguments "
            f"after FILE::FUNC and keyword ones as --arg NAME=VALUE"
        ) from None


def add_kernel_arguments(parser) -> None:
    """The `FILE::FUNC [ARGS...] [--arg name=value]` arguments shared by compile and trace."""
    parser.add_argument(
        "kernel", metavar="FILE::FUNC", help="a @T.prim_func, or a @tilecore.jit (or plain) factory returning one"
    )
    parser.add_argument(
        "factory_args",
        nargs="*",
        metavar="ARG",
        help="positional factory arguments (Python literals, e.g. 256 'float16')",
    )
    parser.add_argument(
        "--arg", action="append", default=[], metavar="NAME=VALUE", help="a keyword factory argument; repeatable"
    )
    parser.add_argument(
        "--target", "-t", default=None, help="target to compile for (default: the default target, see `tile backends`)"
    )


def kernel_from_args(args):
    """(PrimFunc, jit out_idx or None) for parsed compile/trace arguments.

    When the kernel is a @tilecore.jit with its own target and no --target was
    given, `args.target` is set to the jit's target.
    """
    from ..runtime.api import JITFunction, LazyKernel

    obj = load_object(args.kernel)
    pos, kw = parse_factory_args(args.factory_args, args.arg)
    func = build_prim_func(obj, pos, kw, args.kernel)
    out_idx, jit_target = None, None
    if isinstance(obj, JITFunction):
        out_idx, jit_target = obj.out_idx, obj.target
    elif isinstance(obj, LazyKernel):
        out_idx, jit_target = obj._args[0], obj._args[1]
    if args.target is None:
        args.target = jit_target
    return func, out_idx


def ir_text(func) -> str:
    """The function as runnable DSL text (the IR printer)."""
    from ..ir.printer import to_source

    return to_source(func)


def traced_text(func) -> str:
    """The DSL text of `func`, plus facts the DSL cannot show (which copies are predicated)."""
    from ..ir import nodes as N
    from ..ir.visitor import walk_stmts

    text = ir_text(func)
    notes = []
    for stmt in walk_stmts(func.body):
        if isinstance(stmt, N.Copy):
            where = f"line {stmt.span.line}" if stmt.span.line else "(no source line)"
            state = "predicated (bounds not proven)" if stmt.predicated else "bounds proven"
            notes.append(f"#   T.copy({stmt.src.buffer.name} -> {stmt.dst.buffer.name}) at {where}: {state}")
    if notes:
        text = text.rstrip("\n") + "\n# not shown in the DSL text:\n" + "\n".join(notes) + "\n"
    return text


def write_output(path: str, text: str) -> None:
    """Write `text` to `path`; a path that cannot be written is a one-line error, not a traceback."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise CommandLineError(f"cannot write {path}: {err.strerror or err}") from None
