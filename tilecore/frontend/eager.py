"""The eager style: a function whose own body is the kernel, decorated with `@jit`.

    @tilecore.jit
    def add(A, B, block: int):
        N = T.const("N")                 # a compile-time size, taken from the inputs' shapes
        A: T.Tensor((N,), "float32")     # the parameter A is a tensor of this type
        B: T.Tensor((N,), "float32")
        C = T.empty((N,), "float32")     # an output, allocated by the launcher and returned
        with T.Kernel(T.ceildiv(N, block)) as bx:
            ...
        return C

Parameters declared in the body by an annotation are tensor parameters; the
other parameters are Python values of the call (constants of the kernel, like
a factory's arguments). `T.const("M, N")` names sizes that are fixed for one
compilation: given to `.compile(M=...)`, or read from the shapes of the arrays
a call passes. The PrimFunc's parameters are the declared tensors in signature
order, then the `T.empty` outputs in the order `return` lists them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from ..ir import nodes as N
from ..language.tensor import InvalidTensorType, TensorType
from . import exprs as E
from .parser import Parser, _environment, _find_function, _parse_file, _run_type_check


def kernel_call_name(node) -> Optional[str]:
    """'Kernel' when `node` is a `with T.Kernel(...)` statement (by spelling), else None."""
    if not isinstance(node, ast.With) or len(node.items) != 1:
        return None
    call = node.items[0].context_expr
    if isinstance(call, ast.Call):
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        return name if name == "Kernel" else None
    return None


def function_node(func) -> Tuple[ast.FunctionDef, str, str]:
    """(AST of `func`, its file name, the file's text)."""
    import linecache

    code = func.__code__
    filename = code.co_filename
    source = "".join(linecache.getlines(filename, func.__globals__))
    tree = _parse_file(filename, source)
    node = _find_function(tree, func.__name__, code.co_firstlineno)
    if node is None:
        raise ValueError(f"cannot find the source of {func.__name__} in {filename}")
    return node, filename, source


def is_eager(func) -> bool:
    """Whether `func`'s own body holds a `with T.Kernel(...)` block (the eager style)."""
    if not hasattr(func, "__code__"):
        return False
    try:
        node, _, _ = function_node(func)
    except (ValueError, SyntaxError, OSError):
        return False
    return any(kernel_call_name(s) for s in _top_level(node.body))


def _top_level(stmts):
    """Statements of a body, looking into parse-time `if`s (the kernel may sit in one)."""
    for s in stmts:
        yield s
        if isinstance(s, ast.If):
            yield from _top_level(s.body)
            yield from _top_level(s.orelse)


@dataclass(frozen=True)
class ProbedType:
    """A tensor parameter's declared shape as the probe reads it before the sizes are known:
    each dimension an int, a T.const name (a Var), or None (a size computed from others)."""

    shape: Tuple[Union[int, N.Var, None], ...]
    dtype: str = ""  # as written (int4 tensors are passed packed: runtime/eager.py reads sizes so)


class EagerParser(Parser):
    """Parses an eager-style function for given Python arguments and T.const values."""

    def __init__(self, fn_node, filename, source, env, py_args: Dict, consts: Dict[str, int], probe: bool = False):
        super().__init__(fn_node, filename, source, env)
        self.py_args = py_args
        self.consts = consts
        self.probe = probe  # only the statements before the first kernel (to learn the shapes)
        self.declared: Dict[str, N.Buffer] = {}
        self.declared_types: Dict[str, Union[TensorType, ProbedType]] = {}
        self.outputs: List[Tuple[str, N.Buffer]] = []
        self.returned: Optional[List[str]] = None
        self.const_names: List[str] = []

    # ------------------------------------------------------------------ function

    def parse(self) -> N.PrimFunc:
        body = self._parse_body()
        if not any(isinstance(s, N.Kernel) for s in body):
            raise self.error("a kernel must contain a `with T.Kernel(...)` block (found none)", self.fn_node)
        params = [
            self.declared[a.arg]
            for a in self.fn_node.args.args + self.fn_node.args.kwonlyargs
            if a.arg in self.declared
        ]
        for a in self.fn_node.args.args + self.fn_node.args.kwonlyargs:
            if a.arg not in self.py_args and a.arg not in self.declared:
                raise self.error(
                    f"the parameter '{a.arg}' got no Python value and has no "
                    f"`{a.arg}: T.Tensor(shape, dtype)` declaration in the body",
                    a,
                )
        params += [buf for _, buf in self.ordered_outputs()]
        return N.PrimFunc(
            self.fn_node.name, tuple(params), body, tuple(self.dyn_vars.values()), self.source, self.def_span()
        )

    def run_probe(self) -> None:
        """Probe mode: run the statements before the first kernel, which declare the tensor
        parameters (`declared_types`) and the T.const names."""
        self._parse_body()

    def _parse_body(self) -> N.Body:
        for arg in self.fn_node.args.args + self.fn_node.args.kwonlyargs:
            if arg.arg in self.py_args:
                self.scopes.bind(arg.arg, self.py_args[arg.arg], self.span(arg))
        stmts = self.fn_node.body
        if self.probe:
            stmts = stmts[: next((i for i, s in enumerate(stmts) if kernel_call_name(s)), len(stmts))]
        return self.body(stmts)

    def ordered_outputs(self) -> List[Tuple[str, N.Buffer]]:
        """The T.empty outputs, in the order `return` lists them (the others after)."""
        if not self.returned:
            return list(self.outputs)
        by_name = dict(self.outputs)
        first = [(n, by_name[n]) for n in self.returned]
        return first + [(n, b) for n, b in self.outputs if n not in self.returned]

    # ------------------------------------------------------------------ declarations

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is not None or self.in_kernel:
            return super().stmt_AnnAssign(node)
        if not isinstance(node.target, ast.Name):
            raise self.error("a tensor declaration needs a name: `A: T.Tensor(shape, dtype)`", node)
        name = node.target.id
        ttype = self.eval(node.annotation)
        if isinstance(ttype, InvalidTensorType):
            if self.probe:  # a computed size (heads // groups): keep the plain T.const dims
                self.declared_types[name] = self.probe_type(node.annotation)
                return []
            raise self.error(f"the tensor '{name}': {ttype.error}", node.annotation)
        if not isinstance(ttype, TensorType) or ttype.scope != "global":
            raise self.error(
                f"'{name}: ...' declares a tensor parameter and needs a "
                f"T.Tensor(shape, dtype), got {E.describe(ttype)}",
                node.annotation,
            )
        if not any(a.arg == name for a in self.fn_node.args.args + self.fn_node.args.kwonlyargs):
            raise self.error(
                f"'{name}' is declared as a tensor but is not a parameter of {self.fn_node.name}", node.target
            )
        self.declared_types[name] = ttype
        self.declared[name] = self.global_buffer(name, ttype, node)
        return []

    def probe_type(self, annotation) -> ProbedType:
        """The declared shape with every dimension that is not a plain size or name as None."""
        shape = self.eval(annotation.args[0]) if isinstance(annotation, ast.Call) and annotation.args else ()
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        args = annotation.args if isinstance(annotation, ast.Call) else []
        dtype = self.eval(args[1]) if len(args) > 1 else ""
        return ProbedType(tuple(d if isinstance(d, (int, N.Var)) else None for d in dims), str(dtype))

    def global_buffer(self, name: str, ttype: TensorType, node) -> N.Buffer:
        for dim in ttype.shape:
            if isinstance(dim, N.Var):
                self.add_dynamic(dim, node)
        shape = tuple(self.dyn_vars[d.name] if isinstance(d, N.Var) else d for d in ttype.shape)
        buf = N.Buffer(self.fresh(name), shape, ttype.dtype, "global", self.span(node))
        self.scopes.bind(name, buf, self.span(node))
        return buf

    def stmt_Assign(self, node: ast.Assign):
        call = node.value
        intrinsic = None
        if isinstance(call, ast.Call) and not self.in_kernel:
            intrinsic = getattr(self.eval(call.func), "__tile_intrinsic__", None)
        if intrinsic == "const":
            return self.declare_consts(node)
        if intrinsic == "empty":
            return self.declare_output(node)
        return super().stmt_Assign(node)

    def declare_consts(self, node: ast.Assign):
        call = node.value
        if not isinstance(call, ast.Call) or len(call.args) != 1 or call.keywords:
            raise self.error('T.const takes one string of names: T.const("M, N, K")', call)
        text = self.py_value(call.args[0], "the names of T.const")
        names = [n.strip() for n in str(text).split(",") if n.strip()]
        if not names or not all(n.isidentifier() for n in names):
            raise self.error(f"T.const needs comma-separated names, got {text!r}", call.args[0])
        values = []
        for n in names:
            self.const_names.append(n)
            values.append(self.consts[n] if n in self.consts else N.Var(n, "int32"))
        target = node.targets[0]
        elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        targets = [t for t in elts if isinstance(t, ast.Name)]
        if len(elts) != len(values) or len(targets) != len(elts):
            raise self.error(f"T.const declares {len(values)} name(s); unpack them into as many names", target)
        for t, v in zip(targets, values):
            self.scopes.bind(t.id, v, self.span(t))
        return []

    def declare_output(self, node: ast.Assign):
        target = node.targets[0]
        if not isinstance(target, ast.Name) or not isinstance(node.value, ast.Call):
            raise self.error("T.empty must be assigned to a single name", target)
        func = self.eval(node.value.func)
        args = self.bind_arguments(func, node.value, "empty")
        shape = self.py_value(args["shape"], "the shape of T.empty")
        dtype = self.dtype(args["dtype"])
        from ..language.tensor import Tensor

        ttype = Tensor(shape, dtype)
        if isinstance(ttype, InvalidTensorType):
            if self.probe:
                return []
            raise self.error(f"T.empty: {ttype.error}", node.value)
        buf = self.global_buffer(target.id, ttype, node)
        self.outputs.append((target.id, buf))
        return []

    def stmt_Return(self, node: ast.Return):
        if self.in_kernel:
            return super().stmt_Return(node)
        value = node.value
        elts = [] if value is None else value.elts if isinstance(value, ast.Tuple) else [value]
        names = []
        outputs = dict(self.outputs)
        for e in elts:
            if not isinstance(e, ast.Name) or e.id not in outputs:
                raise self.error("an eager kernel returns the names of its T.empty outputs", e)
            names.append(e.id)
        self.returned = names
        return []


def parse_eager(func, py_args: Dict, consts: Dict[str, int], probe: bool = False):
    """Parse an eager-style `func` for these Python arguments and T.const values.

    Returns (PrimFunc, parser); with `probe=True` only the statements before the
    kernel run and the PrimFunc is None (the parser holds the declared types).
    """
    node, filename, source = function_node(func)
    parser = EagerParser(node, filename, source, _environment(func, None), py_args, consts, probe)
    if probe:
        parser.run_probe()
        return None, parser
    prim = parser.parse()
    _run_type_check(prim)
    return prim, parser
