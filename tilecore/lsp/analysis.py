"""Analysing one document: diagnostics, facts and fixes for every kernel in it (in the worker).

`analyze(path, text, target)` runs the document's definitions (tilecore.lsp.document),
builds each kernel, and runs the compiler's own pass pipeline on it — the core passes,
plus the passes and layout rules of the `target` backend when one is chosen — collecting:

* errors from the frontend and the passes, at their span, with the compiler's message;
* warnings the passes issue (uninitialized reads, ...) and copies whose bounds were not
  proven (they are predicated);
* with a target, its capability checks (memory limits, features, threads);
* facts for hovers and inlay hints, and the edits of the fixes code actions offer.

The result is a JSON-able dict with LSP ranges; nothing here compiles code or imports TVM.
"""

from __future__ import annotations

import ast
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..ir import nodes as N
from ..ir.span import Span
from ..ir.visitor import walk_stmts
from . import facts as F
from .document import (
    ARGS_COMMENT,
    KernelSource,
    LoadedDocument,
    Problem,
    def_span,
    explain_skipped_names,
    load_document,
    problem_from_exception,
)
from .language_help import aliases_in
from .positions import lsp_range, span_range

SEVERITY = {"error": 1, "warning": 2, "information": 3, "hint": 4}


def analyze(path: str, text: str, target: Optional[str] = None, layouts: bool = True) -> Dict[str, Any]:
    """Diagnostics and facts for the document `text` stored at `path` (see the module docstring).

    Layout inference with a backend's rules mostly adds facts for hovers, and it can cost as
    much as all other passes together: with `layouts=False` it is skipped when the backend
    has layout rules (and with it the passes after it), which is how the server gets
    diagnostics out quickly. `model["layouts"]` says whether the whole pipeline ran."""
    started = time.perf_counter()
    model: Dict[str, Any] = {"path": path, "target": target, "kernels": [], "buffers": [], "ops": []}
    clear_fixes: Dict[int, Dict] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = load_document(path, text)
        backend, full = _backend(doc, target)
        model["layouts"] = layouts or not _has_layout_rules(backend)
        runs = [run for run in (_start_kernel(doc, s, backend, full) for s in doc.kernels) if run]
        for run in runs:
            _run_passes(doc, run, len(run.passes) if model["layouts"] else run.layout_index)
            _early_findings(doc, run, clear_fixes, caught)
            _add_facts(doc, run, model)
    model["diagnostics"] = _diagnostics(doc, caught, clear_fixes)
    model["line_count"] = len(doc.lines)
    model["seconds"] = round(time.perf_counter() - started, 4)
    return model


@dataclass
class _KernelRun:
    """One kernel going through the pass pipeline, pass by pass."""

    source: KernelSource
    func: N.PrimFunc
    ctx: Any
    passes: List[Any]
    layout_index: int
    done: int = 0
    failed: bool = False


def _backend(doc: LoadedDocument, target: Optional[str]):
    """(backend, full target) for the `tile.target` setting; (None, None) when none is chosen."""
    if not target:
        return None, None
    from ..runtime.api import resolve_target

    try:
        return resolve_target(target)
    except Exception as err:  # an unknown target is a setting problem, shown once on line 1
        doc.problems.append(Problem(Span(doc.path, 1, 0), f"tile.target: {err}", "warning", "target"))
        return None, None


def _has_layout_rules(backend) -> bool:
    """Whether layout inference does anything for `backend` (no rules: it records nothing)."""
    if backend is None:
        return False
    from ..passes.layout_inference import collect_rules

    return bool(collect_rules(backend))


def _build(doc: LoadedDocument, source: KernelSource) -> Optional[N.PrimFunc]:
    """The kernel's PrimFunc (calling a jit factory with its arguments); None after an error."""
    if isinstance(source.obj, N.PrimFunc):
        return source.obj
    args, kwargs = source.args
    try:
        return source.obj.prim_func(*args, **kwargs)
    except (Exception, SystemExit) as err:  # the user's factory or kernel: report, never raise
        doc.problems.append(problem_from_exception(err, doc.path, def_span(doc, source.node)))
        return None


def _start_kernel(doc: LoadedDocument, source: KernelSource, backend, target) -> Optional[_KernelRun]:
    from ..passes.pipeline import PassContext, pass_name
    from ..runtime.api import build_pipeline

    func = _build(doc, source)
    if func is None:
        return None
    passes = build_pipeline(backend).passes()
    names = [pass_name(p) for p in passes]
    ctx = PassContext(backend=backend, target=target, options={"target": target, "out_idx": []}, source=func.source)
    layout = names.index("layout_inference") if "layout_inference" in names else len(passes)
    return _KernelRun(source, func, ctx, passes, layout)


def _run_passes(doc: LoadedDocument, run: _KernelRun, stop: int) -> None:
    """Run the kernel's passes up to (not including) number `stop`; a failure ends its run."""
    from ..passes.pipeline import pass_name

    while run.done < stop and not run.failed:
        pass_ = run.passes[run.done]
        try:
            result = pass_(run.func, run.ctx)
            if not isinstance(result, N.PrimFunc):
                raise TypeError(f"pass {pass_name(pass_)!r} returned {type(result).__name__}, expected a PrimFunc")
        except Exception as err:  # a pass rejected the kernel: show it, keep what ran before
            run.failed = True
            problem = problem_from_exception(err, doc.path, def_span(doc, run.source.node))
            if pass_name(pass_) == "memory_plan":
                problem.data["fixes"] = _shrink_fixes(doc, run.source, run.func, problem.span)
            elif pass_name(pass_) == "check_features":
                problem.data["fixes"] = _threads_fixes(doc, run, problem.span)
            doc.problems.append(problem)
            return
        run.func = result
        run.done += 1


def _early_findings(doc: LoadedDocument, run: _KernelRun, clear_fixes: Dict[int, Dict], caught) -> None:
    """Unproven copies, and the T.clear fixes for the uninitialized-read warnings (looked
    for only when there are such warnings: the search costs as much as a pass)."""
    for fact in run.ctx.analyses.get("bounds", ()):
        if not fact.proven and fact.span.line > 0 and fact.span.file == doc.path:
            what = "T.copy" if fact.op == "Copy" else "the atomic"
            doc.problems.append(
                Problem(fact.span, f"{what} is not proven in bounds, so it is {fact.reason}", "information", "bounds")
            )
    if any(w.category.__name__ == "UninitializedReadWarning" for w in caught):
        clear_fixes.update(_clear_fixes(doc, run.func))


def _add_facts(doc: LoadedDocument, run: _KernelRun, model: Dict[str, Any]) -> None:
    """The kernel's, its buffers' and its tile ops' facts, from what the passes left."""
    source, func, analyses = run.source, run.func, run.ctx.analyses
    index = len(model["kernels"])
    def_range = span_range(doc.lines, def_span(doc, source.node))
    first = min([source.node.lineno] + [d.lineno for d in source.node.decorator_list])
    lines = [first - 1, (source.node.end_lineno or first) - 1]
    model["kernels"].append(F.kernel_facts(func, analyses, def_range, lines, source.name, run.ctx.target))
    buffers = F.buffer_facts(func, analyses, doc.lines, index)
    model["buffers"].extend(buffers)
    names = {b["ir_name"]: b["name"] for b in buffers}
    model["ops"].extend(F.op_facts(func, analyses, doc.lines, index, names))


def _warning_problems(doc: LoadedDocument, caught, clear_fixes: Dict[int, Dict]) -> List[Problem]:
    """Warnings issued about lines of this document, with a fix where one is known."""
    problems = []
    for item in caught:
        if item.filename != doc.path or not item.lineno:
            continue
        text = doc.lines[item.lineno - 1] if item.lineno <= len(doc.lines) else ""
        col = len(text.encode("utf-8")) - len(text.lstrip().encode("utf-8"))
        problem = Problem(Span(doc.path, item.lineno, col), str(item.message), "warning", item.category.__name__)
        if item.category.__name__ == "UninitializedReadWarning" and item.lineno in clear_fixes:
            problem.data["fixes"] = [clear_fixes[item.lineno]]
        problems.append(problem)
    return problems


def _diagnostics(doc: LoadedDocument, caught, clear_fixes: Dict[int, Dict]) -> List[Dict]:
    """LSP diagnostics (plain dicts) for the document's problems and warnings, without repeats."""
    problems = doc.problems + _warning_problems(doc, caught, clear_fixes)
    explain_skipped_names(doc.skipped, problems)
    out, seen = [], set()
    for p in problems:
        span = p.span if p.span.line > 0 else Span(doc.path, 1, 0)
        rng = span_range(doc.lines, span)
        key = (rng["start"]["line"], rng["start"]["character"], p.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(
            {
                "range": rng,
                "severity": SEVERITY[p.severity],
                "message": p.message,
                "source": "tilecore",
                "code": p.code,
                "data": p.data or None,
            }
        )
    return out


# ----------------------------------------------------------------------------- fixes


def _ancestors(body, target: N.Stmt, path=()) -> Optional[Tuple[N.Stmt, ...]]:
    """The statements enclosing `target` (outermost first), or None when it is not in `body`."""
    for stmt in body:
        if stmt is target:
            return path
        for field in ("body", "then_body", "else_body"):
            found = _ancestors(getattr(stmt, field, ()) or (), target, path + (stmt,))
            if found is not None:
                return found
    return None


def _clear_fixes(doc: LoadedDocument, func: N.PrimFunc) -> Dict[int, Dict]:
    """Line of each uninitialized read -> the edit that clears the buffer before its loop."""
    from ..passes.init_check import uninitialized_reads

    own = sorted(aliases_in(doc.text) - {"T"})  # the document's own name for the language, else T
    alias = own[0] if own else "T"
    fixes = {}
    for buf, stmt, _ in uninitialized_reads(func):
        if buf.scope == "var" or stmt.span.line <= 0:
            continue
        loops = [s for s in _ancestors(func.body, stmt) or () if isinstance(s, (N.For, N.Parallel))]
        anchor = loops[0] if loops else stmt
        line = anchor.span.line
        text = doc.lines[line - 1]
        indent = text[: len(text) - len(text.lstrip())]
        name = F.source_name(doc.lines, buf.span, buf.name)
        fixes[stmt.span.line] = {
            "title": f"Insert {alias}.clear({name}) before the {'loop' if loops else 'statement'}",
            "edits": [{"range": lsp_range(doc.lines, line, 0, line, 0), "newText": f"{indent}{alias}.clear({name})\n"}],
        }
    return fixes


def _shrink_fixes(doc: LoadedDocument, source: KernelSource, func: N.PrimFunc, span: Span) -> List[Dict]:
    """Halving the largest dimension of the allocation that overflowed block-local memory."""
    alloc = next((s for s in walk_stmts(func.body) if isinstance(s, N.Alloc) and s.span == span), None)
    if alloc is None:
        return []
    shape = alloc.buffer.static_shape()
    if shape is None or doc.tree is None:
        return []
    elts = _shape_elements(doc.tree, span)
    if elts is None or len(elts) != len(shape):
        return []
    axis = max(range(len(shape)), key=lambda i: (shape[i] % 2 == 0 and shape[i] > 1, shape[i], -i))
    value = shape[axis]
    if value < 2 or value % 2:
        return []
    edit = _edit_for_value(doc, source, elts[axis], value, value // 2)
    if edit is None:
        return []
    what, rng = edit
    new_shape = tuple(value // 2 if i == axis else d for i, d in enumerate(shape))
    name = F.source_name(doc.lines, alloc.buffer.span, alloc.buffer.name)
    return [
        {
            "title": f"Shrink {name} to {new_shape}: {what} {value} → {value // 2}",
            "edits": [{"range": rng, "newText": str(value // 2)}],
        }
    ]


def _threads_fixes(doc: LoadedDocument, run: _KernelRun, span: Span) -> List[Dict]:
    """Setting `threads=` of a T.Kernel that asks for more threads than the backend has."""
    limit = getattr(getattr(run.ctx.backend, "capabilities", None), "max_threads", None)
    kernel = next((s for s in run.func.body if isinstance(s, N.Kernel) and s.span == span), None)
    if limit is None or kernel is None or len(kernel.threads) != 1 or kernel.threads[0] <= limit or doc.tree is None:
        return []
    call = next(
        (
            n
            for n in ast.walk(doc.tree)
            if isinstance(n, ast.Call) and n.lineno == span.line and any(k.arg == "threads" for k in n.keywords)
        ),
        None,
    )
    if call is None:
        return []
    value = next(k.value for k in call.keywords if k.arg == "threads")
    edit = _edit_for_value(doc, run.source, value, kernel.threads[0], limit)
    if edit is None:
        return []
    what, rng = edit
    return [
        {
            "title": f"Use the {limit} threads backend {run.ctx.backend.name} allows: {what} "
            f"{kernel.threads[0]} → {limit}",
            "edits": [{"range": rng, "newText": str(limit)}],
        }
    ]


def _shape_elements(tree: ast.Module, span: Span) -> Optional[List[ast.expr]]:
    """The element nodes of the shape tuple in the allocation written at `span`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno == span.line and isinstance(node.value, ast.Call):
            call = node.value
            shape = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "shape"), None)
            if isinstance(shape, (ast.Tuple, ast.List)):
                return list(shape.elts)
    return None


def _edit_for_value(doc: LoadedDocument, source: KernelSource, node: ast.expr, old: int, new: int):
    """(what is changed, LSP range) of the literal that sets a shape element, or None."""

    def literal(n) -> bool:
        return isinstance(n, ast.Constant) and n.value == old and type(n.value) is int

    def rng(n, line_offset=0, col_offset=0):
        line = n.lineno + line_offset
        return lsp_range(doc.lines, line, n.col_offset + col_offset, line, n.end_col_offset + col_offset)

    if literal(node):
        return "the literal", rng(node)
    if not isinstance(node, ast.Name):
        return None
    params = [a.arg for a in source.node.args.posonlyargs + source.node.args.args]
    if node.id in params and source.args_line:
        found = _comment_argument(doc, source, node.id, params.index(node.id))
        if found is not None:
            return f"`{node.id}` in `# tile: args=`", found
    defaults = dict(zip(params[len(params) - len(source.node.args.defaults) :], source.node.args.defaults))
    if node.id in defaults and literal(defaults[node.id]):
        return f"the default of `{node.id}`", rng(defaults[node.id])
    for stmt in doc.tree.body if doc.tree is not None else ():
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == node.id
            and literal(stmt.value)
        ):
            return f"`{node.id}`", rng(stmt.value)
    return None


def _comment_argument(doc: LoadedDocument, source: KernelSource, name: str, position: int):
    """The LSP range of argument `name` (or positional `position`) in the `# tile: args=` comment."""
    text = doc.lines[source.args_line - 1]
    match = ARGS_COMMENT.match(text)
    if match is None:
        return None
    start = match.start("args")
    call = ast.parse(f"_({match.group('args')})", "<tile: args>", "eval").body
    if not isinstance(call, ast.Call):
        return None
    node = next((k.value for k in call.keywords if k.arg == name), None)
    if node is None and position < len(call.args):
        node = call.args[position]
    if not isinstance(node, ast.Constant):
        return None
    shift = len(text[:start].encode("utf-8")) - 2  # the parsed text starts with "_("
    end = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return lsp_range(doc.lines, source.args_line, node.col_offset + shift, source.args_line, end + shift)
