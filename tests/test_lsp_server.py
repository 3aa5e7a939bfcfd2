"""`tile lsp` driven over stdio by a real LSP client (pygls), one server for the module.

The expected spans and messages come from the compiler itself (the frontend and the pass
pipeline run in this process on the same text), so these tests check that the editor
sees exactly what `tilecore.compile` would say, where it would say it.
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest

pytest.importorskip("pygls", reason="the lsp extra (pygls) is not installed")

from tilecore.lsp.client import TileLspClient, apply_edits  # noqa: E402

GEMM = """import tilecore
import tilecore.language as T


@tilecore.jit(out_idx=[-1])
def matmul(M=256, N=256, K=256, block_M=64, block_N=64, block_K=32, dtype="float16", accum="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return main
"""


@pytest.fixture(scope="module")
def lsp(tmp_path_factory):
    """One `tile lsp` over stdio (checking against no backend), shared by the module's tests."""
    client = TileLspClient([sys.executable, "-m", "tilecore.cli.main", "lsp"], options={"timeBudget": 30})
    client.folder = str(tmp_path_factory.mktemp("lsp"))
    yield client
    client.stop()


def _document(lsp, name: str, text: str):
    """Open `text` as a file of the test folder (also written to disk, for the compiler)."""
    path = os.path.join(lsp.folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path, lsp.open(path, text)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


def _compiler_error(path: str, target=None, **factory_args):
    """The TileCompileError the compiler raises for the file's `matmul` (frontend, then passes)."""
    import tilecore
    from tilecore.cli.loading import load_object
    from tilecore.diagnostics import TileCompileError

    with pytest.raises(TileCompileError) as info:
        func = load_object(f"{path}::matmul").prim_func(**factory_args)
        tilecore.lower(func, target=target)
    return info.value


def _set_target(lsp, uri, target):
    """Switch the server's tile.target and wait until the document was analysed again."""
    import time

    lsp.diagnostics(uri)  # the analysis under the old setting has arrived
    since = time.perf_counter()
    lsp.configure({"target": target, "timeBudget": 30})
    return lsp.diagnostics(uri, after=since)[0]


def test_broken_kernel_error_at_compiler_span_then_edit_clears_it(lsp):
    broken = GEMM.replace(
        "B_s = T.alloc_shared((block_K, block_N), dtype)", "B_s = T.alloc_shared((block_N, block_K), dtype)"
    )
    path, uri = _document(lsp, "broken_gemm.py", broken)
    diagnostics, _ = lsp.diagnostics(uri)
    error = _compiler_error(path)
    assert len(diagnostics) == 1
    d = diagnostics[0]
    assert d.severity == 1 and d.source == "tilecore"
    assert d.message == error.message and "T.gemm shape mismatch" in d.message
    assert (d.range.start.line, d.range.start.character) == (error.span.line - 1, error.span.col)
    gemm_line = _line_of(broken, "T.gemm(")
    assert d.range.start.line == gemm_line
    assert d.range.start.character == broken.splitlines()[gemm_line].index("T.gemm")

    version = lsp.change(uri, GEMM)
    assert lsp.diagnostics(uri, version)[0] == []


def test_hover_on_fragment_shows_shape_dtype_scope_and_layout(lsp):
    import tilecore
    from tilecore.cli.loading import load_object
    from tilecore.plugin.registry import get_registry

    if "cuda" not in get_registry().names():
        pytest.skip("the layout comes from a backend with layout rules (tile-cuda is not installed)")
    path, uri = _document(lsp, "hover_gemm.py", GEMM)
    _set_target(lsp, uri, "cuda")
    try:
        _, ctx = tilecore.lower(load_object(f"{path}::matmul").prim_func(), target="cuda")
        layout = ctx.analyses["layout"]["C_f"]
        line = _line_of(GEMM, "T.gemm(")
        hover = lsp.hover(uri, line, GEMM.splitlines()[line].index("C_f") + 1)
        text = hover.contents.value
        assert "**C_f**: fragment buffer `[64, 64]` `float32`" in text
        assert repr(layout) in text
        assert f"registers per thread: {layout.local_size * 4 // 4}" in text
        shared = _line_of(GEMM, "A_s = T.alloc_shared")
        hover = lsp.hover(uri, shared, GEMM.splitlines()[shared].index("A_s"))
        assert "shared buffer `[64, 32]` `float16`" in hover.contents.value
        assert repr(ctx.analyses["layout"]["A_s"]) in hover.contents.value
    finally:
        _set_target(lsp, uri, None)


def test_hover_on_kernel_shows_grid_threads_shared_memory_and_stages(lsp):
    _, uri = _document(lsp, "kernel_hover.py", GEMM)
    lsp.diagnostics(uri)
    line = _line_of(GEMM, "def matmul")
    text = lsp.hover(uri, line, GEMM.splitlines()[line].index("matmul") + 2).contents.value
    assert "grid: (4, 4)" in text and "threads: 128" in text
    # A_s 64x32 and B_s 32x64 float16 are live together: 4096 + 4096 bytes
    assert "shared memory per block: 8192 bytes" in text
    assert "pipeline `k`" in text and "num_stages=2 over 8 iterations" in text


def test_hover_on_tile_ops_shows_regions_bounds_and_documentation(lsp):
    import tilecore.language as T

    _, uri = _document(lsp, "op_hover.py", GEMM)
    lsp.diagnostics(uri)
    lines = GEMM.splitlines()
    copy = _line_of(GEMM, "T.copy(A[")
    text = lsp.hover(uri, copy, lines[copy].index("copy") + 1).contents.value
    assert "src: `A` region 64×32 (from [by * 64, k * 32])" in text
    assert "dst: `A_s` region 64×32 (whole buffer)" in text
    assert "in bounds: A dim 0" in text and T.copy.__doc__.splitlines()[0] in text
    gemm = _line_of(GEMM, "T.gemm(")
    text = lsp.hover(uri, gemm, lines[gemm].index("gemm")).contents.value
    assert "M×N×K = 64×64×32, float16 × float16 → float32" in text


def test_inlay_hints_show_region_shapes_of_copy_and_gemm(lsp):
    _, uri = _document(lsp, "hints.py", GEMM)
    lsp.diagnostics(uri)
    lines = GEMM.splitlines()
    hints = {(h.position.line, h.position.character): h.label for h in lsp.inlay_hints(uri, 0, len(lines))}
    copy_a = _line_of(GEMM, "T.copy(A[")
    region_end = lines[copy_a].index("], A_s") + 1
    assert hints[(copy_a, region_end)] == "64×32"
    assert hints[(copy_a, lines[copy_a].index("A_s)") + 3)] == "64×32"
    gemm = _line_of(GEMM, "T.gemm(")
    assert hints[(gemm, lines[gemm].index("C_f)") + 3)] == "64×64"
    assert hints[(gemm, lines[gemm].index("B_s,") + 3)] == "32×64"


def test_hints_and_hovers_stay_while_a_line_is_being_typed(lsp):
    _, uri = _document(lsp, "typing_hints.py", GEMM)
    lsp.diagnostics(uri)
    lines = GEMM.splitlines()
    before = lsp.inlay_hints(uri, 0, len(lines))
    half_typed = GEMM.replace("T.gemm(A_s, B_s, C_f)", "T.gemm(A_s, B_s, C_")  # same lines
    version = lsp.change(uri, half_typed)
    [error] = lsp.diagnostics(uri, version)[0]
    assert error.severity == 1
    assert [h.label for h in lsp.inlay_hints(uri, 0, len(lines))] == [h.label for h in before]
    line = _line_of(GEMM, "def matmul")
    text = lsp.hover(uri, line, lines[line].index("matmul")).contents.value
    assert "from the last text it built from" in text and "grid: (4, 4)" in text
    version = lsp.change(uri, GEMM + "\n# one more line\n")  # builds again
    assert lsp.diagnostics(uri, version)[0] == []


def test_uninitialized_accumulator_warning_and_its_fix(lsp):
    import tilecore
    from tilecore.cli.loading import load_object

    no_clear = GEMM.replace("            T.clear(C_f)\n", "")
    path, uri = _document(lsp, "no_clear.py", no_clear)
    diagnostics, _ = lsp.diagnostics(uri)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilecore.lower(load_object(f"{path}::matmul").prim_func())
    expected = [str(w.message) for w in caught if w.category.__name__ == "UninitializedReadWarning"]
    assert [d.message for d in diagnostics] == expected
    assert diagnostics[0].severity == 2 and diagnostics[0].range.start.line == _line_of(no_clear, "T.gemm(")
    actions = lsp.code_actions(uri, diagnostics)
    assert [a.title for a in actions] == ["Insert T.clear(C_f) before the loop"]
    fixed = apply_edits(no_clear, actions[0].edit.changes[uri])
    assert fixed == GEMM
    version = lsp.change(uri, fixed)
    assert lsp.diagnostics(uri, version)[0] == []


def test_backend_shared_memory_limit_on_the_allocation_line_and_shrink_fix(lsp):
    from tilecore.plugin.registry import get_registry

    if "metal" not in get_registry().names():
        pytest.skip("tile-metal is not installed")
    big = GEMM.replace("block_M=64, block_N=64, block_K=32", "block_M=128, block_N=128, block_K=128")
    path, uri = _document(lsp, "too_big.py", big)
    lsp.diagnostics(uri)
    diagnostics = _set_target(lsp, uri, "metal")
    try:
        error = _compiler_error(path, target="metal")
        assert "backend metal allows 32768 bytes" in error.message
        assert [d.message for d in diagnostics] == [error.message]
        d = diagnostics[0]
        assert (d.range.start.line, d.range.start.character) == (error.span.line - 1, error.span.col)
        assert "T.alloc_shared" in big.splitlines()[d.range.start.line]
        actions = lsp.code_actions(uri, diagnostics)
        assert len(actions) == 1 and "block_K 128 → 64" in actions[0].title.replace("`", "")
        fixed = apply_edits(big, actions[0].edit.changes[uri])
        assert "block_K=64" in fixed
        version = lsp.change(uri, fixed)
        assert lsp.diagnostics(uri, version)[0] == []
    finally:
        _set_target(lsp, uri, None)


def test_factory_arguments_from_the_tile_args_comment(lsp):
    text = GEMM.replace("def matmul(M=256, N=256, K=256,", "def matmul(M, N, K,")
    _, uri = _document(lsp, "no_defaults.py", text)
    diagnostics, _ = lsp.diagnostics(uri)
    assert len(diagnostics) == 1 and diagnostics[0].severity == 3
    assert "add a comment `# tile: args=...`" in diagnostics[0].message
    with_args = text.replace("@tilecore.jit", "# tile: args=512, 128, 96\n@tilecore.jit")
    version = lsp.change(uri, with_args)
    assert lsp.diagnostics(uri, version)[0] == []
    line = _line_of(with_args, "def main")
    hover = lsp.hover(uri, line, with_args.splitlines()[line].index("A:"))
    assert "global buffer `[512, 96]` `float16`" in hover.contents.value


def test_completion_signature_help_and_documentation_of_language_ops(lsp):
    import tilecore.language as T

    text = GEMM.replace("            T.clear(C_f)\n", "            T.cl\n            T.gemm(A_s, B_s, \n")
    _, uri = _document(lsp, "typing.py", text)
    line = _line_of(text, "T.cl")
    items = {i.label: i for i in lsp.completion(uri, line, len(text.splitlines()[line])).items}
    assert "clear" in items and items["clear"].documentation.value == T.clear.__doc__.strip()
    line = _line_of(text, "T.gemm(A_s, B_s, ")
    help_ = lsp.signature_help(uri, line, len(text.splitlines()[line]))
    assert help_.signatures[0].label.startswith("T.gemm(A, B, C")
    assert help_.active_parameter == 2
    copy = _line_of(text, "T.copy(A[")
    locations = lsp.definition(uri, copy, text.splitlines()[copy].index("copy") + 1)
    targets = [(loc.uri.rsplit("/", 1)[-1], loc.range.start.line) for loc in locations]
    assert targets[-1][0] == "ops.py"
    import inspect

    import tilecore.language.ops as ops

    assert targets[-1][1] == inspect.getsourcelines(inspect.unwrap(ops.copy))[1] - 1


def test_tvm_is_never_imported(lsp):
    status = lsp.status()
    assert status["server_tvm_loaded"] is False
    assert [w["tvm_loaded"] for w in status["workers"]] == [False, False]


def test_time_budget_stops_a_runaway_analysis_and_the_server_recovers(lsp):
    loops = GEMM.replace("    @T.prim_func\n", "    while True:\n        pass\n    @T.prim_func\n")
    lsp.configure({"timeBudget": 3})
    _, uri = _document(lsp, "runaway.py", loops)
    try:
        diagnostics, _ = lsp.diagnostics(uri)
        assert len(diagnostics) == 1 and "longer than the 3 s budget" in diagnostics[0].message
        _, good = _document(lsp, "after_runaway.py", GEMM)
        assert lsp.diagnostics(good)[0] == []
    finally:
        lsp.close_document(uri)
        lsp.configure({"timeBudget": 30})


def test_slow_imports_are_not_charged_to_the_time_budget(lsp):
    with open(os.path.join(lsp.folder, "slow_neighbour.py"), "w", encoding="utf-8") as f:
        f.write("import time\ntime.sleep(4)  # like a first `import torch`\n")
    text = GEMM.replace("import tilecore\n", "import tilecore\nimport slow_neighbour  # noqa\n", 1)
    lsp.configure({"timeBudget": 3})
    try:
        _, uri = _document(lsp, "slow_import.py", text)
        assert lsp.diagnostics(uri)[0] == []
    finally:
        lsp.configure({"timeBudget": 30})
