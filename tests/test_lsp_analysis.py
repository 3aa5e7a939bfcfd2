"""The language server's analysis (tilecore.lsp.analysis) in this process: what it runs, where
it puts findings, and that it never needs TVM."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore.lsp.analysis import analyze
from tilecore.lsp.document import frame_span, load_document
from tilecore.lsp.positions import byte_to_index, lsp_range

KERNEL = """import tilecore
import tilecore.language as T

BLOCK = 64


@tilecore.jit(out_idx=[-1])
def scale(N=256, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=64) as bx:
            A_s = T.alloc_shared((BLOCK,), dtype)
            T.copy(A[bx * BLOCK], A_s)
            T.copy(A_s, B[bx * BLOCK])
    return main


kernel = scale(1 << 10)
result = kernel.run_it_now()
"""


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=20), st.text(min_size=0, max_size=20))
def test_byte_columns_become_code_point_columns(before, after):
    line = before + "x" + after
    col = len(before.encode("utf-8"))
    assert byte_to_index(line, col) == len(before)
    rng = lsp_range([line], 1, col, 1, col + 1)
    assert rng == {"start": {"line": 0, "character": len(before)}, "end": {"line": 0, "character": len(before) + 1}}


def test_only_definitions_run_at_module_level(tmp_path):
    text = KERNEL.replace("BLOCK = 64", "BLOCK = int(2 ** math.log2(64))").replace(
        "import tilecore\n", "import math\n\nimport tilecore\n", 1
    )
    doc = load_document(str(tmp_path / "k.py"), text)
    assert doc.namespace["BLOCK"] == 64
    assert "kernel" not in doc.namespace and "result" not in doc.namespace  # would compile and run
    assert [k.name for k in doc.kernels] == ["scale"]
    assert doc.problems == []


def test_a_name_from_skipped_code_is_explained(tmp_path):
    text = KERNEL.replace("BLOCK = 64", "def pick_block():\n    return 64\n\n\nBLOCK = pick_block()")
    model = analyze(str(tmp_path / "k.py"), text)
    [d] = model["diagnostics"]
    assert d["severity"] == 3 and "undefined name 'BLOCK'" in d["message"]
    line = text.splitlines().index("BLOCK = pick_block()") + 1
    assert f"on line {line}, which the language server does not run" in d["message"]


def test_columns_count_characters_not_bytes(tmp_path):
    text = KERNEL.replace(
        "            T.copy(A_s, B[bx * BLOCK])", '            note = "é→∑"; T.copy(A_s, B_missing[bx * BLOCK])'
    )
    model = analyze(str(tmp_path / "k.py"), text)
    [d] = model["diagnostics"]
    row = text.splitlines()[d["range"]["start"]["line"]]
    assert "B_missing" in d["message"]
    assert d["range"]["start"]["character"] == row.index("B_missing")


def test_tile_args_comment_feeds_the_factory_and_bad_ones_are_reported(tmp_path):
    text = KERNEL.replace("def scale(N=256, ", "def scale(N, ")
    model = analyze(str(tmp_path / "k.py"), text.replace("@tilecore.jit", "# tile: args=512\n@tilecore.jit"))
    assert model["diagnostics"] == []
    assert [b["shape"] for b in model["buffers"] if b["name"] == "A"] == [[512]]
    bad = text.replace("@tilecore.jit", "# tile: args=512,,\n@tilecore.jit")
    [d] = analyze(str(tmp_path / "k.py"), bad)["diagnostics"]
    assert d["range"]["start"]["line"] == bad.splitlines().index("# tile: args=512,,")
    assert d["message"].startswith("cannot read `# tile: args=`")


def test_shrink_fix_edits_the_tile_args_comment(tmp_path):
    from tilecore.plugin.registry import get_registry

    if "metal" not in get_registry().names():
        pytest.skip("tile-metal is not installed")
    text = KERNEL.replace("def scale(N=256, ", "def scale(N, BLOCK, ").replace("BLOCK = 64\n", "")
    text = text.replace("@tilecore.jit", "# tile: args=N=1 << 16, BLOCK=16384\n@tilecore.jit")
    model = analyze(str(tmp_path / "k.py"), text, "metal")
    [d] = model["diagnostics"]
    assert "backend metal allows 32768 bytes" in d["message"]
    [fix] = d["data"]["fixes"]
    [edit] = fix["edits"]
    row = edit["range"]["start"]["line"]
    line = text.splitlines()[row]
    assert line.startswith("# tile: args=")
    assert line[edit["range"]["start"]["character"] : edit["range"]["end"]["character"]] == "16384"
    assert edit["newText"] == "8192"


def test_analysis_never_imports_tvm():
    """Every backend's passes and layout rules run without TVM (no import blocker here)."""
    script = f"""
import json, sys
from tilecore.lsp.analysis import analyze
from tilecore.plugin.registry import get_registry
text = {KERNEL!r}
counts = {{}}
for target in [None] + get_registry().names():
    counts[str(target)] = len(analyze("/tmp/tile_lsp_k.py", text, target)["kernels"])
print(json.dumps({{"tvm": "tvm" in sys.modules, "kernels": counts}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tvm"] is False
    assert set(result["kernels"].values()) == {1}


def test_unproven_copies_are_reported_with_the_bounds_pass_reason(tmp_path):
    import tilecore
    from tilecore.cli.loading import load_object

    text = KERNEL.replace("def scale(N=256,", "def scale(N=200,")  # the last tile is partial
    text = text.split("\n\nkernel = ")[0] + "\n"  # importing it here must not compile it
    path = tmp_path / "partial.py"
    path.write_text(text)
    model = analyze(str(path), text)
    _, ctx = tilecore.lower(load_object(f"{path}::scale").prim_func())
    unproven = [f for f in ctx.analyses["bounds"] if not f.proven]
    assert len(unproven) == 2
    got = [(d["range"]["start"]["line"], d["severity"], d["message"]) for d in model["diagnostics"]]
    assert got == [(f.span.line - 1, 3, f"T.copy is not proven in bounds, so it is {f.reason}") for f in unproven]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["A_s", "B[k * 32, bx]", "C_f", "(1, 2)", "f(x, y)", "{1: 2}"]), max_size=5))
def test_signature_help_counts_top_level_arguments(arguments):
    from tilecore.lsp.language_help import active_parameter, open_call

    before = "        T.gemm(" + "".join(a + ", " for a in arguments)
    name, index, keyword = open_call(before, {"T"})
    assert (name, index, keyword) == ("gemm", len(arguments), "")
    assert active_parameter("gemm", index, "") == min(len(arguments), 8)
    assert open_call(before + "transpose_B=", {"T"})[2] == "transpose_B"


def test_user_code_that_exits_or_raises_is_a_diagnostic_at_its_line(tmp_path):
    text = KERNEL.replace("    @T.prim_func\n", "    if N > 100:\n        raise SystemExit(3)\n    @T.prim_func\n")
    [d] = analyze(str(tmp_path / "k.py"), text)["diagnostics"]
    assert d["severity"] == 1 and d["message"] == "SystemExit: 3"
    assert d["range"]["start"]["line"] == text.splitlines().index("        raise SystemExit(3)")


def test_a_frame_without_columns_still_gives_its_line(tmp_path):
    """Python 3.10's traceback frames have no colno / end_lineno / end_colno (3.11 added them): the
    diagnostic of a Python error in the document reading them crashed there (found by mypy)."""
    path = str(tmp_path / "k.py")
    frame = traceback.FrameSummary(path, 7, "main", line="x = 1")
    for name in ("colno", "end_lineno", "end_colno"):  # the frame as Python 3.10 makes it
        delattr(frame, name)
    span = frame_span(frame, path)
    assert (span.file, span.line, span.col, span.end_line, span.end_col) == (path, 7, 0, 7, 0)


def test_module_level_classes_and_dataclasses_work(tmp_path):
    config = "\n\n@dataclasses.dataclass\nclass Config:\n    block: int = 64\n"
    text = KERNEL.replace("BLOCK = 64\n", "BLOCK = 64\n" + config)
    text = text.replace("import tilecore\n", "import dataclasses\n\nimport tilecore\n", 1)
    model = analyze(str(tmp_path / "k.py"), text)
    assert model["diagnostics"] == [] and len(model["kernels"]) == 1


def test_facts_of_kernels_that_stopped_building_are_kept_while_the_line_count_holds(tmp_path):
    from tilecore.lsp.features import carry_over_facts

    two = KERNEL.replace(
        "kernel = scale(1 << 10)",
        '@tilecore.jit\ndef twice(N=128, dtype="float16"):\n    return scale.factory(N, dtype)',
    )
    old = analyze(str(tmp_path / "k.py"), two)
    assert [k["name"] for k in old["kernels"]] == ["scale", "twice"]
    broken = two.replace("T.copy(A_s, B[bx * BLOCK])", "T.copy(A_s, Q[bx * BLOCK])")
    new = analyze(str(tmp_path / "k.py"), broken)
    assert new["kernels"] == [] and len(new["diagnostics"]) == 2
    merged = carry_over_facts(old, new)
    assert [(k["name"], k.get("stale")) for k in merged["kernels"]] == [("scale", True), ("twice", True)]
    for index in (0, 1):
        kept = [b for b in merged["buffers"] if b["kernel"] == index]
        assert [b["dtype"] for b in kept if b["name"] == "A"] == [["float32", "float16"][index]]
    one_more_line = analyze(str(tmp_path / "k.py"), broken + "\n")
    assert carry_over_facts(old, one_more_line)["kernels"] == []


def test_too_many_threads_for_the_backend_and_the_fix(tmp_path):
    from tilecore.plugin.registry import get_registry

    if "metal" not in get_registry().names():
        pytest.skip("tile-metal is not installed")
    text = KERNEL.replace("def scale(N=256, ", "def scale(N=256, threads=2048, ").replace(
        "threads=64)", "threads=threads)"
    )
    [d] = analyze(str(tmp_path / "k.py"), text, "metal")["diagnostics"]
    assert "threads=2048 exceeds the 1024 threads" in d["message"]
    [fix] = d["data"]["fixes"]
    [edit] = fix["edits"]
    line = text.splitlines()[edit["range"]["start"]["line"]]
    assert line.startswith("def scale(") and edit["newText"] == "1024"
    assert line[edit["range"]["start"]["character"] : edit["range"]["end"]["character"]] == "2048"
