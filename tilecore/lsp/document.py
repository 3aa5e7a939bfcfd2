"""Running the definitions of an edited document and finding its kernels (in the worker).

The language server must see what the compiler sees: `@T.prim_func` parses when its
`def` runs, and a `@tilecore.jit` factory builds its kernel when called with arguments.
So the worker runs the document's module-level *definitions* in a fresh module: imports,
`def`/`class` statements (with their decorators) and assignments (`LOG2E = 1 / math.log(2)`,
`N = T.dynamic("N")`), except assignments that call the file's own functions or classes,
names set by skipped code, or anything that compiles. Other statements (`c = kernel(a, b)`,
bare calls, `if __name__ == "__main__":`) are skipped: they would compile or run kernels.

Factory arguments come from a `# tile: args=...` comment on the lines just above the
factory (written as call arguments: `# tile: args=1024, 1024, 512, block_K=64`), else
from the factory's defaults.
"""

from __future__ import annotations

import ast
import linecache
import re
import sys
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..ir.span import Span

DOCUMENT_MODULE = "__tile_lsp__"
ARGS_COMMENT = re.compile(r"^\s*#\s*tile:\s*args\s*=(?P<args>.*)$")


@dataclass
class Problem:
    """A finding to report: where (a Span in the document), what, and how bad."""

    span: Span
    message: str
    severity: str = "error"  # "error", "warning", "information", "hint"
    code: str = ""  # what kind of finding (for code actions)
    data: Dict[str, Any] = field(default_factory=dict)


@dataclass
class KernelSource:
    """A top-level definition that yields a kernel: a prim_func, or a jit factory with arguments."""

    name: str
    node: ast.FunctionDef
    obj: Any
    args: Tuple[Sequence[Any], Dict[str, Any]] = ((), {})
    args_line: int = 0  # line of the `# tile: args=` comment (0: defaults)


@dataclass
class LoadedDocument:
    """A document after its definitions ran: text, AST, namespace, kernels and problems so far."""

    path: str
    text: str
    lines: List[str]
    tree: Optional[ast.Module]
    namespace: Dict[str, Any]
    kernels: List[KernelSource] = field(default_factory=list)
    problems: List[Problem] = field(default_factory=list)
    skipped: Dict[str, int] = field(default_factory=dict)  # name -> line of a skipped assignment


def _call_is_allowed(call: ast.Call, blocked: set) -> bool:
    """Whether a module-level call may run: not one of the file's own functions or classes
    (a jit factory called there compiles), nor a name set by skipped code, nor anything
    that compiles (`tilecore.compile`, `....compile(...)`, `jit(...)(...)`)."""
    func = call.func
    if isinstance(func, ast.Call):
        return False
    if isinstance(func, ast.Attribute) and func.attr == "compile":
        return False
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id in blocked:
        return False
    return root.id != "tilecore" or (isinstance(func, ast.Attribute) and _attribute_path(func)[1:2] == ["language"])


def _attribute_path(node) -> List[str]:
    """["tilecore", "language", "dynamic"] for `tilecore.language.dynamic`."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(getattr(node, "id", ""))
    return parts[::-1]


def _runnable(node: ast.stmt, blocked: set) -> bool:
    """Whether a module-level statement only defines things (see the module docstring)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = node.value
        if value is None:
            return True
        return all(_call_is_allowed(n, blocked) for n in ast.walk(value) if isinstance(n, ast.Call)) and not any(
            isinstance(n, (ast.Await, ast.Yield, ast.NamedExpr)) for n in ast.walk(value)
        )
    if isinstance(node, ast.Try):  # `try: import torch / except ImportError: torch = None`
        inner = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        return all(_runnable(s, blocked) for s in inner)
    return False


def _assigned_names(node: ast.stmt) -> List[str]:
    targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
    return [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]


def exception_span(err: BaseException, path: str, fallback: Span) -> Span:
    """The innermost traceback frame of `err` in the document `path`, as a Span."""
    span = fallback
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == path and frame.lineno:
            span = frame_span(frame, path)
    return span


def frame_span(frame: traceback.FrameSummary, path: str) -> Span:
    """The Span of a traceback frame; Python 3.10's frames have a line but no columns (3.11
    added colno, end_lineno and end_colno)."""
    line = frame.lineno or 0
    col = getattr(frame, "colno", None) or 0
    end_line = getattr(frame, "end_lineno", None) or line
    return Span(path, line, col, end_line, getattr(frame, "end_colno", None) or 0)


def problem_from_exception(err: BaseException, path: str, fallback: Span) -> Problem:
    """A Problem for an exception raised while running the document's definitions or kernels."""
    from ..diagnostics import TileCompileError, TileError

    if isinstance(err, TileCompileError):
        span = err.span if err.span.line > 0 and err.span.file == path else exception_span(err, path, fallback)
        return Problem(span, err.message, "error", "compile-error")
    if isinstance(err, TileError):
        return Problem(exception_span(err, path, fallback), str(err).splitlines()[0], "error", "tile-error")
    text = f"{type(err).__name__}: {err}"
    return Problem(exception_span(err, path, fallback), text, "error", "python-error")


def _node_span(path: str, node) -> Span:
    return Span(path, node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)


def _def_span(path: str, node: ast.FunctionDef, lines: List[str]) -> Span:
    """The span of `def name` (where a kernel-wide finding is shown)."""
    text = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
    start = text.find("def " + node.name)
    col = len(text[:start].encode("utf-8")) if start >= 0 else node.col_offset
    return Span(path, node.lineno, col, node.lineno, col + len("def ") + len(node.name))


def _parse(path: str, text: str) -> ast.Module:
    """The document's AST, through the frontend's own cache: the frontend parses the same
    text again for each kernel, and then finds it there (the tree is never modified)."""
    from ..frontend.parser import _parse_file

    return _parse_file(path, text)


def load_document(path: str, text: str) -> LoadedDocument:
    """Parse the document, run its definitions, and list its kernels (see the module docstring)."""
    lines = text.splitlines()
    doc = LoadedDocument(path, text, lines, None, _module_namespace(path))
    try:
        doc.tree = _parse(path, text)
    except SyntaxError as err:
        line = err.lineno or 1
        col = len((err.text or "")[: max((err.offset or 1) - 1, 0)].encode("utf-8"))
        doc.problems.append(Problem(Span(path, line, col), f"invalid syntax: {err.msg}", "error", "syntax"))
        return doc
    # The frontend reads the kernel's source through linecache: give it the editor's text.
    linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)
    flags = _future_flags(doc.tree)
    blocked = {n.name for n in doc.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    with _importable_neighbours(path):
        for node in doc.tree.body:
            if not _runnable(node, blocked | set(doc.skipped)):
                for name in _assigned_names(node) if isinstance(node, (ast.Assign, ast.AnnAssign)) else ():
                    doc.skipped[name] = node.lineno
                continue
            _run_statement(doc, node, flags)
    for node in doc.tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in doc.namespace:
            kernel = _kernel_source(doc, node)
            if kernel is not None:
                doc.kernels.append(kernel)
    return doc


def _module_namespace(path: str) -> Dict[str, Any]:
    """A fresh module for the document's code, registered in sys.modules (as `__tile_lsp__`:
    one document at a time) because code like @dataclass looks its module up there."""
    module = types.ModuleType(DOCUMENT_MODULE)
    module.__file__ = path
    sys.modules[DOCUMENT_MODULE] = module
    return module.__dict__


def _importable_neighbours(path: str):
    """The document's folder on sys.path while its statements run, so that it can import the
    modules beside it (taken off afterwards: see neighbours_importable)."""
    from ..cli.loading import neighbours_importable

    return neighbours_importable(path.rsplit("/", 1)[0] if "/" in path else "")


def run_imports(path: str, text: str) -> int:
    """Import what the document's top-level import statements name (failures are left for the
    analysis to report); returns how many statements ran. The server calls this with a long
    timeout before an analysis whose imports changed, so that importing a heavy module
    (torch) once is not charged to the analysis's time budget."""
    try:
        tree = ast.parse(text, path)
    except SyntaxError:
        return 0
    count = 0
    with _importable_neighbours(path):
        for node in tree.body:
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.module != "__future__"):
                try:
                    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), _module_namespace(path))
                except (Exception, SystemExit):  # reported by the analysis, at the import's line
                    pass
                count += 1
    return count


def _future_flags(tree: ast.Module) -> int:
    """Compiler flags of the document's `from __future__ import ...` (each statement runs alone)."""
    import __future__

    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def _run_statement(doc: LoadedDocument, node: ast.stmt, flags: int = 0) -> None:
    code = compile(ast.Module(body=[node], type_ignores=[]), doc.path, "exec", flags=flags, dont_inherit=True)
    try:
        exec(code, doc.namespace)
    except (Exception, SystemExit) as err:  # the user's code: every failure becomes a diagnostic
        problem = problem_from_exception(err, doc.path, _node_span(doc.path, node))
        if problem.code == "python-error" and not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            problem.severity = "warning"  # it may need what only the real run has (a GPU, files)
            problem.message = f"the language server could not run this line: {problem.message}"
        doc.problems.append(problem)


def explain_skipped_names(skipped: Dict[str, int], problems: List[Problem]) -> None:
    """Say so when an undefined-name problem is about a module-level name the server does not
    compute (its assignment calls code other than the language): it is not the user's error."""
    for problem in problems:
        for name, line in skipped.items():
            quoted = f"'{name}'"
            if (
                quoted in problem.message
                and ("not defined" in problem.message or "undefined name" in problem.message)
                and problem.severity == "error"
            ):
                problem.severity = "information"
                problem.message += (
                    f" ({quoted} is set on line {line}, which the language server does "
                    "not run because it calls code other than the language)"
                )
                break


def _kernel_source(doc: LoadedDocument, node: ast.FunctionDef) -> Optional[KernelSource]:
    from ..ir.nodes import PrimFunc
    from ..runtime.api import JITFunction, LazyKernel

    obj = doc.namespace[node.name]
    if isinstance(obj, PrimFunc):
        return KernelSource(node.name, node, obj)
    if isinstance(obj, LazyKernel):
        return KernelSource(node.name, node, obj.func)
    if not isinstance(obj, JITFunction):
        return None
    args_line, args_text = _args_comment(doc.lines, node)
    if args_line:
        try:
            args = _parse_args(args_text, doc.namespace)
        except (Exception, SystemExit) as err:
            doc.problems.append(
                Problem(
                    Span(doc.path, args_line, 0),
                    f"cannot read `# tile: args=`: {type(err).__name__}: {err}",
                    "error",
                    "args-comment",
                )
            )
            return None
        return KernelSource(node.name, node, obj, args, args_line)
    missing = [a.arg for a in _required_params(node)]
    if missing:
        doc.problems.append(
            Problem(
                _def_span(doc.path, node, doc.lines),
                f"{node.name} is not checked: its parameters {', '.join(missing)} have "
                f"no defaults; add a comment `# tile: args=...` above it "
                f"(e.g. `# tile: args={', '.join('128' for _ in missing)}`)",
                "information",
                "needs-args",
            )
        )
        return None
    return KernelSource(node.name, node, obj)


def _required_params(node: ast.FunctionDef) -> List[ast.arg]:
    positional = node.args.posonlyargs + node.args.args
    required = positional[: len(positional) - len(node.args.defaults)]
    required += [a for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is None]
    return required


def _args_comment(lines: List[str], node: ast.FunctionDef) -> Tuple[int, str]:
    """(line, text) of the `# tile: args=` comment just above the factory's decorators, or (0, "")."""
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    row = first - 2
    while row >= 0 and lines[row].lstrip().startswith("#"):
        match = ARGS_COMMENT.match(lines[row])
        if match:
            return row + 1, match.group("args").strip()
        row -= 1
    return 0, ""


def _parse_args(text: str, namespace: Dict[str, Any]) -> Tuple[list, dict]:
    """Positional and keyword values of `text` written as call arguments (`1024, block_K=64`)."""
    call = ast.parse(f"_({text})", mode="eval").body
    if not isinstance(call, ast.Call):
        raise ValueError("expected call arguments, e.g. 1024, 1024, block_K=64")

    def value(node):
        return eval(compile(ast.Expression(node), "<tile: args>", "eval"), dict(namespace))

    return [value(a) for a in call.args], {k.arg: value(k.value) for k in call.keywords}


def def_span(doc: LoadedDocument, node: ast.FunctionDef) -> Span:
    """The span of the kernel's `def name` in the document."""
    return _def_span(doc.path, node, doc.lines)
