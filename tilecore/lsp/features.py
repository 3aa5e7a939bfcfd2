"""Hover text, inlay hints and fixes, from an analysed document's model (in the server).

The model is what tilecore.lsp.analysis returns: plain dicts with LSP ranges. These
functions only look things up in it, so they answer at once while a new analysis runs.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from . import language_help
from .positions import contains, qualifier_of, word_at

HINT_OPS = ("copy", "gemm")
OP_OF_CALL = {"clear": "fill"}  # language calls whose IR op has another name


def _shape(extents) -> str:
    return "×".join(str(e) for e in extents)


def _bytes(n) -> str:
    if n is None:
        return "?"
    return f"{n} bytes" + (f" ({n / 1024:g} KiB)" if n >= 1024 else "")


def _kernels_at(model: Dict, line: int) -> List[int]:
    return [i for i, k in enumerate(model.get("kernels", ())) if k["lines"][0] <= line <= k["lines"][1]]


def hover(model: Dict, lines: List[str], line: int, character: int, aliases) -> Optional[Tuple[str, Dict]]:
    """(markdown, range of the word) for the position, or None when there is nothing to say."""
    text = lines[line] if line < len(lines) else ""
    word, start, end = word_at(text, character)
    if not word:
        return None
    rng = {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}
    kernels = _kernels_at(model, line)
    if qualifier_of(text, start) in aliases and word in language_help.language_names():
        op_name = OP_OF_CALL.get(word, word)
        op = next(
            (
                o
                for o in model.get("ops", ())
                if o["kernel"] in kernels and o["op"] == op_name and contains(o["range"], line, character)
            ),
            None,
        )
        if op is not None:
            return op_markdown(model, op, word), rng
        if word == "Kernel" and kernels:
            return kernel_markdown(model["kernels"][kernels[0]]), rng
        return language_markdown(word), rng
    for index in kernels:
        kernel = model["kernels"][index]
        if word in (kernel["name"], kernel["prim_func"]):
            return kernel_markdown(kernel), rng
        buffer = _buffer_named(model, index, word, line)
        if buffer is not None:
            return buffer_markdown(model, buffer), rng
    return None


def _buffer_named(model: Dict, kernel: int, name: str, line: int) -> Optional[Dict]:
    """The buffer `name` visible at `line` (the latest definition before it, for rebound names)."""
    found = [b for b in model.get("buffers", ()) if b["kernel"] == kernel and b["name"] == name]
    before = [b for b in found if b["line"] <= line]
    return max(before, key=lambda b: b["line"]) if before else (found[0] if found else None)


def buffer_markdown(model: Dict, b: Dict) -> str:
    """Shape, dtype, scope, layout and memory of a buffer."""
    out = [f"**{b['name']}**: {b['scope']} buffer `{b['shape']}` `{b['dtype']}` — {_bytes(b['bytes'])}"]
    if b["scope"] == "shared":
        stages = f", {b['stages']} pipeline stages" if b["stages"] > 1 else ""
        out.append(f"shared memory: {_bytes(b['shared_bytes'])}{stages}")
    if b["registers"]:
        r = b["registers"]
        out.append(f"registers per thread: {r['registers']} × 32-bit ({r['elements']} elements, {r['how']})")
    if b["layout"]:
        out.append(f"layout ({model.get('target')}): `{b['layout']}`")
    elif b["scope"] in ("shared", "fragment"):
        out.append(
            "layout: set `tile.target` to a backend to see the one it infers"
            if not model.get("target")
            else f"layout: backend {model['target']} infers none for it"
        )
    return "\n\n".join(out)


def kernel_markdown(k: Dict) -> str:
    """Grid, threads, memory totals and pipeline stages of a kernel."""
    name = k["name"] if k["name"] == k["prim_func"] else f"{k['name']} → prim_func {k['prim_func']}"
    stale = " — from the last text it built from (it does not build now)" if k.get("stale") else ""
    out = [
        f"**kernel {name}**" + (f" (target {k['target']})" if k.get("target") else "") + stale,
        f"grid: ({', '.join(map(str, k['grid']))}) · threads: {' × '.join(map(str, k['threads']))}",
    ]
    limit = f" of {_bytes(k['shared_limit'])} allowed" if k.get("shared_limit") else ""
    out.append(f"shared memory per block: {_bytes(k['shared_bytes'])}{limit}")
    if k.get("fragment_bytes") is not None:
        out.append(f"fragment/local memory per block: {_bytes(k['fragment_bytes'])}")
    for p in k["pipelines"]:
        trips = f" over {p['trip_count']} iterations" if p["trip_count"] is not None else ""
        staged = f", stage buffers {', '.join(p['stage_buffers'])}" if p["stage_buffers"] else ""
        out.append(f"pipeline `{p['var']}` (line {p['line'] + 1}): num_stages={p['num_stages']}{trips}{staged}")
    out.append("parameters: " + "; ".join(f"`{p}`" for p in k["params"]))
    return "\n\n".join(out)


def op_markdown(model: Dict, op: Dict, word: str) -> str:
    """A tile op's regions and what the passes concluded, then the language's own documentation."""
    out = [f"**T.{op['op']}**"]
    for r in op["regions"]:
        where = "whole buffer" if r["whole"] else f"from [{', '.join(map(str, r['starts']))}]"
        out.append(f"{r['role']}: `{r['buffer']}` region {_shape(r['extents'])} ({where})")
    out.extend(op["notes"])
    return "\n\n".join(out) + "\n\n---\n\n" + language_markdown(word)


def language_markdown(name: str) -> str:
    """Signature and docstring of `T.name`."""
    obj = language_help.language_names()[name]
    doc = language_help.doc_text(obj)
    return f"```python\n{language_help.signature_text(name, obj)}\n```" + (f"\n\n{doc}" if doc else "")


def inlay_hints(model: Dict, first_line: int, last_line: int) -> List[Dict]:
    """`128×32` after every region of a T.copy / T.gemm between the two lines."""
    hints = []
    for op in model.get("ops", ()):
        if op["op"] not in HINT_OPS or not first_line <= op["range"]["start"]["line"] <= last_line:
            continue
        for r in op["regions"]:
            if r["range"] is None:
                continue
            hints.append(
                {
                    "position": r["range"]["end"],
                    "label": _shape(r["extents"]),
                    "tooltip": f"{r['role']} region of {r['buffer']}: {_shape(r['extents'])}",
                }
            )
    return hints


def carry_over_facts(old: Optional[Dict], new: Dict) -> Dict:
    """`new`, plus the facts of kernels that `old` had and `new` lacks (they failed to build
    in the new text), while the text has the same number of lines: hovers and inlay hints
    stay while a line is being typed, and the diagnostics say what is wrong."""
    if not old or old.get("line_count") != new.get("line_count"):
        return new
    have = {k["name"] for k in new.get("kernels", ())}
    merged = dict(
        new, kernels=list(new.get("kernels", ())), buffers=list(new.get("buffers", ())), ops=list(new.get("ops", ()))
    )
    for index, kernel in enumerate(old.get("kernels", ())):
        if kernel["name"] in have:
            continue
        moved = len(merged["kernels"])
        merged["kernels"].append(dict(kernel, stale=True))
        for key in ("buffers", "ops"):
            merged[key].extend(dict(item, kernel=moved) for item in old[key] if item["kernel"] == index)
    return merged


def fixes(diagnostic_data) -> List[Dict]:
    """The fixes (title and edits) a published diagnostic carries in its `data`."""
    if isinstance(diagnostic_data, dict):
        return list(diagnostic_data.get("fixes") or ())
    return []
