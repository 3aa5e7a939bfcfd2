"""`tile trace FILE::FUNC [--html out.html]`: the Tile IR after every pass.

The terminal gets the IR text after each pass (unchanged passes say so); the
HTML page is self-contained (inline CSS, no scripts or links) and shows the
input, then a side-by-side diff (difflib.HtmlDiff) between consecutive passes.
"""

from __future__ import annotations

import difflib
import html
import sys
from typing import List, Tuple

from .loading import add_kernel_arguments, kernel_from_args, traced_text, write_output


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "trace",
        help="show the Tile IR after every pass (terminal and HTML with diffs)",
        description="Run the pass pipeline for a target on FILE::FUNC and print the IR after "
        "every pass; --html writes one page with the diffs between passes.",
    )
    add_kernel_arguments(p)
    p.add_argument("--html", default=None, metavar="OUT.html", help="also write an HTML page")
    p.add_argument("--changed-only", action="store_true", help="print only passes that changed the IR")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..diagnostics import TileError
    from ..runtime import api

    func, out_idx = kernel_from_args(args)
    failure = None
    try:
        steps = api.trace(func, target=args.target, out_idx=out_idx)
    except TileError as err:
        # Show how far the pipeline got, then the error (main prints it): the failing pass
        # is the one after the last step shown.
        partial = getattr(err, "partial_trace", None)
        if not partial:
            raise
        steps = partial
        failure = err
    texts = [(name, traced_text(f)) for name, f in steps]
    out = sys.stdout
    previous = None
    for index, (name, text) in enumerate(texts):
        changed = text != previous
        if changed or not args.changed_only:
            title = "input" if index == 0 else f"after pass {index}: {name}"
            out.write(f"==== {title} " + "=" * max(4, 60 - len(title)) + "\n")
            out.write(text if changed else "(unchanged)\n")
            if changed and not text.endswith("\n"):
                out.write("\n")
        previous = text
    if failure is not None:
        failed = _pass_after(func, args.target, len(texts) - 1)
        out.write(f"==== pass {len(texts)}: {failed} failed " + "=" * max(4, 50 - len(failed)) + "\n")
    if args.html:
        page = render_html(
            func.name,
            texts,
            target=args.target or api.default_target(),
            error=str(failure) if failure is not None else "",
        )
        write_output(args.html, page)
        print(f"wrote {args.html}", file=sys.stderr)
    if failure is not None:
        raise failure
    return 0


def _pass_after(func, target, done: int) -> str:
    """The name of pass number done + 1 of the pipeline for `target` (the one that failed)."""
    from ..runtime import api

    try:
        backend, _ = api.resolve_target(target)
        names = api.build_pipeline(backend).names()
    except Exception:  # naming the pass is a nicety; never hide the real error
        return "a pass"
    return names[done] if done < len(names) else "a pass"


_CSS = """
body { font-family: sans-serif; margin: 1.5em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
table.diff { font-family: monospace; border: 1px solid #ccc; border-collapse: collapse; }
table.diff td { padding: 0 .4em; vertical-align: top; white-space: pre-wrap; }
.diff_header { background: #e0e0e0; text-align: right; }
td.diff_header { color: #666; }
.diff_next { background: #c0c0c0; }
.diff_add { background: #aaffaa; }
.diff_chg { background: #ffff77; }
.diff_sub { background: #ffaaaa; }
.unchanged { color: #666; font-style: italic; }
nav li { margin: .1em 0; }
"""


def render_html(kernel_name: str, texts: List[Tuple[str, str]], target: str = "", error: str = "") -> str:
    """One self-contained HTML page: the input IR, then a diff per pass."""
    differ = difflib.HtmlDiff(tabsize=4, wrapcolumn=90)
    esc = html.escape
    parts = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>tile trace: {esc(kernel_name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>tile trace: {esc(kernel_name)}{' for ' + esc(target) if target else ''}</h1>",
        "<nav><ol>",
    ]
    for index, (name, _) in enumerate(texts):
        parts.append(f"<li><a href='#step{index}'>{esc(name)}</a></li>")
    parts.append("</ol></nav>")
    first_name, first_text = texts[0]
    parts.append(f"<h2 id='step0'>{esc(first_name)}</h2><pre>{esc(first_text)}</pre>")
    for index in range(1, len(texts)):
        (prev_name, prev), (name, text) = texts[index - 1], texts[index]
        parts.append(f"<h2 id='step{index}'>pass {index}: {esc(name)}</h2>")
        if prev == text:
            parts.append("<p class='unchanged'>no change</p>")
            continue
        parts.append(
            differ.make_table(
                prev.splitlines(),
                text.splitlines(),
                fromdesc=f"before ({esc(prev_name)})",
                todesc=f"after {esc(name)}",
                context=False,
            )
        )
        parts.append(f"<details><summary>full IR after {esc(name)}</summary><pre>{esc(text)}</pre></details>")
    if error:
        parts.append(f"<h2 id='error'>pass {len(texts)} failed</h2><pre>{esc(error)}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
