"""`tile new-backend NAME [--kind scratch|toolkit] [--dir DIR] [--force]`: write a backend plugin package.

The package installs and appears in `tile backends` straight away. Two starting points
(docs/writing-a-backend.md):

* `--kind scratch` (default), for hardware with its own compiler, like plugins/tile-npu:
  codegen and launcher start as the reference interpreter (correct by definition, so
  the generated conformance tests pass from day one), and a vendor replaces them piece
  by piece with a real compiler and runtime, keeping the tests green.
* `--kind toolkit`, for a SIMT GPU that TVM can emit code for, like the test plugin
  tests/plugins/tile_toygpu: the plugin fills in a `TargetDescription`, contributes
  lowering rules and intrinsics, and tilecore's lowering toolkit does the rest; it
  starts at the compile tier (TVM's CUDA C emitter writes the source).
"""

from __future__ import annotations

import keyword
import os
import re
import sys
from typing import Dict

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "new-backend",
        help="write a new backend plugin package (a working starting point)",
        description="Write tile-NAME/: pyproject.toml with the `tilecore` entry point, hook "
        "implementations that delegate to the reference interpreter, conformance tests "
        "and a README. `pip install -e tile-NAME` and it shows in `tile backends`.",
    )
    p.add_argument("name", help="backend name: lower case letters, digits and _ (the target users write)")
    p.add_argument(
        "--kind",
        choices=sorted(KINDS),
        default="scratch",
        help="scratch: own codegen, starts as the reference interpreter (like tile-npu); "
        "toolkit: a SIMT GPU on tilecore's lowering toolkit (rules + intrinsics)",
    )
    p.add_argument("--dir", default=None, help="where to write the package (default: ./tile-NAME)")
    p.add_argument("--force", action="store_true", help="overwrite files in an existing directory")
    p.set_defaults(func=run)


def check_name(name: str) -> str:
    """The validated backend name (ValueError naming the problem otherwise)."""
    if not _NAME.match(name) or keyword.iskeyword(name):
        raise ValueError(
            f"backend name {name!r} must be lower case letters, digits and '_', "
            f"starting with a letter (it becomes the target and the package tile_{name})"
        )
    return name


def render(name: str, kind: str = "scratch") -> Dict[str, str]:
    """The files of the new package of `kind` ("scratch" or "toolkit"): relative path -> text."""
    from .. import __version__
    from ..ir.version import TILE_IR_VERSION

    major, minor = (int(x) for x in __version__.split(".")[:2])
    subs = {
        "NAME": name,
        "PKG": f"tile_{name}",
        "DIST": f"tile-{name}",
        "IRV": TILE_IR_VERSION,
        "TCMIN": f"{major}.{minor}",
        "TCMAX": f"{major}.{minor + 1}",
    }

    def fill(text: str) -> str:
        for k, v in subs.items():
            text = text.replace("@" + k + "@", v)
        return text

    if kind not in KINDS:
        raise ValueError(f"unknown scaffold kind {kind!r}; choose from {', '.join(sorted(KINDS))}")
    return {path: fill(text) for path, text in KINDS[kind].items()}


def write_package(name: str, directory: str, force: bool = False, kind: str = "scratch") -> list:
    """Write the package for backend `name` into `directory`; returns the paths written."""
    check_name(name)
    files = render(name, kind)
    if os.path.exists(directory) and os.listdir(directory) and not force:
        raise FileExistsError(f"{directory} exists and is not empty (use --force to overwrite)")
    written = []
    for rel, text in files.items():
        path = os.path.join(directory, rel.replace("@PKG@", f"tile_{name}"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    return written


def run(args) -> int:
    try:
        name = check_name(args.name)
    except ValueError as e:
        print(f"tile new-backend: {e}", file=sys.stderr)
        return 2
    directory = args.dir or f"tile-{name}"
    try:
        written = write_package(name, directory, args.force, args.kind)
    except FileExistsError as e:
        print(f"tile new-backend: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} files to {directory}/")
    print("next steps:")
    print(f"  pip install -e {directory}        # then `tile backends` lists '{name}'")
    if args.kind == "toolkit":
        print(f"  pytest {directory}/tests            # compile-tier conformance on the lowering toolkit")
        print(f"  edit {directory}/tile_{name}/plugin.py (target, codegen) and rules.py (rules, intrinsics)")
    else:
        print(f"  pytest {directory}/tests            # conformance against the reference interpreter")
        print(f"  edit {directory}/tile_{name}/plugin.py: replace codegen and launcher with your compiler")
    return 0


_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "@DIST@"
version = "0.1.0"
description = "tilecore backend plugin for @NAME@"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["tilecore>=@TCMIN@,<@TCMAX@", "numpy>=1.24"]

[project.optional-dependencies]
test = ["pytest>=7", "hypothesis>=6.80", "tile-conformance"]

# This line is what makes tilecore find the backend: group "tilecore", any name,
# value = the module holding the hook implementations.
[project.entry-points.tilecore]
@NAME@ = "@PKG@.plugin"

[tool.setuptools.packages.find]
include = ["@PKG@*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

_INIT = '''"""@DIST@: a tilecore backend plugin (generated by `tile new-backend @NAME@`)."""
__version__ = "0.1.0"
'''

_PLUGIN = '''"""Hook implementations of the @NAME@ backend (entry point `@NAME@ = "@PKG@.plugin"`).

Starting point generated by `tile new-backend`: codegen stores the Tile IR and
the launcher runs the reference interpreter, so every conformance test passes
from the first install. Replace the pieces one at a time:

1. `make_backend`: declare the truth about your hardware -- dtypes, features
   (tilecore.language.features.FEATURES), gemm dtype pairs, memory limits.
   The core rejects kernels that use undeclared features with a clear error,
   and conformance reports them as unsupported, never as passed.
2. `tilecore_passes`: add your own passes at named pipeline points.
3. `tilecore_codegen`: compile `module.func` (Tile IR after the core passes;
   `module.analyses` holds "bounds", "liveness", "memory_plan", "layout") to
   your binary; put it in `Artifact.blobs`, readable text in `Artifact.source`.
4. `tilecore_launcher`: return `launch(args, bindings)` that runs the artifact.
Run `pytest tests` (or `tile conformance @NAME@`) after every step.
See docs/writing-a-backend.md and the worked example plugins/tile-npu.
"""
from __future__ import annotations

from tilecore.plugin import hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus

from . import __version__

NAME = "@NAME@"


def make_backend() -> Backend:
    """What the backend declares: targets, accepted Tile IR versions, capabilities."""
    from tilecore.interp.plugin import make_backend as reference_backend

    # Starting point: the reference interpreter's capabilities (the whole language).
    # Narrow these to what your hardware does.
    caps = reference_backend().capabilities
    return Backend(
        name=NAME,
        targets=(NAME,),
        ir_versions=("@IRV@",),
        capabilities=Capabilities(
            features=caps.features,
            dtypes=caps.dtypes,
            gemm_dtypes=caps.gemm_dtypes,
            max_shared_memory=caps.max_shared_memory,
            max_fragment_memory=caps.max_fragment_memory,
            max_threads=caps.max_threads,
            warp_size=caps.warp_size,
            vector_bytes=caps.vector_bytes,
            memory_space="cpu",        # where kernel arguments live; "cpu" while running on the host
            tiers=("execute",),
        ),
        toolchain_status=toolchain_status,
        device_present=lambda: True,
        distribution="@DIST@",
        version=__version__,
        priority=-500,                 # never the default target until it is a real device
        description="@NAME@ backend (starting point: runs the reference interpreter)",
    )


def toolchain_status() -> ToolchainStatus:
    """What `tile backends` shows: can this backend compile here, and on which device?"""
    return ToolchainStatus(ok=True, summary="starting point: compiles to Tile IR, runs the reference interpreter",
                           device="host CPU (reference interpreter)")


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend (cheap: no toolchain imports here)."""
    register(make_backend())


@hookimpl
def tilecore_passes(backend, pipeline):
    """Add backend passes, e.g. pipeline.insert("before_codegen", my_pass)."""
    if backend.name != NAME:
        return


@hookimpl
def tilecore_codegen(backend, module, options):
    """Compile module.func for the device. Starting point: keep the IR as JSON."""
    if backend.name != NAME:
        return None
    from tilecore.ir.serialize import dumps

    return Artifact(backend=NAME, target=module.target, entry=module.func.name,
                    source=dumps(module.func), meta={"ir": dumps(module.func)})


@hookimpl
def tilecore_launcher(backend, artifact):
    """A callable launch(args, bindings). Starting point: the reference interpreter."""
    if backend.name != NAME:
        return None
    from tilecore.interp import run
    from tilecore.ir.serialize import loads
    from tilecore.runtime.arrays import as_numpy

    func = loads(artifact.meta["ir"])

    def launch(args, bindings):
        arrays = [as_numpy(a) for a in args]
        run(func, arrays, dict(bindings))

    return launch
'''

_TEST_SMOKE = '''"""The @NAME@ backend is discovered and runs a kernel like the reference interpreter."""
import numpy as np

import tilecore
import tilecore.language as T
from tilecore.plugin.registry import get_registry
from tilecore.testing import assert_matches_reference


def test_backend_is_registered():
    backend = get_registry().backends["@NAME@"]
    assert backend.distribution == "@DIST@"
    assert backend.toolchain_status().ok


def test_vector_add_matches_reference():
    @T.prim_func
    def add(A: T.Tensor((100,), "float32"), B: T.Tensor((100,), "float32"), C: T.Tensor((100,), "float32")):
        with T.Kernel(T.ceildiv(100, 32)) as bx:
            a = T.alloc_fragment((32,), "float32")
            T.copy(A[bx * 32], a)
            for i in T.Parallel(32):
                a[i] = a[i] + B[T.min(bx * 32 + i, 99)]
            T.copy(a, C[bx * 32])

    rng = np.random.default_rng(0)
    x = rng.standard_normal(100).astype(np.float32)
    y = rng.standard_normal(100).astype(np.float32)
    out = assert_matches_reference(add, [x, y], backend="@NAME@", out_idx=[-1])
    assert out.shape == (100,)
'''

_TEST_CONFORMANCE = '''"""Conformance of @NAME@ against the reference interpreter
(the same suite as `tile conformance @NAME@`).

TILE_CONFORMANCE_EXAMPLES sets how many programs are generated (default 30
here; use the suite's default or more before a release).
"""
import os

import pytest

tile_conformance = pytest.importorskip("tile_conformance", reason="pip install tile-conformance")


def test_conformance():
    from tile_conformance.runner import run_suite

    examples = int(os.environ.get("TILE_CONFORMANCE_EXAMPLES", "30"))
    report = run_suite("@NAME@", examples=examples, seed=0, shrink=False)
    failed = {name: row for name, row in report["features"].items() if row.get("fail")}
    assert not report["suite_errors"], report["suite_errors"]
    assert not failed, "features with failing programs: " + ", ".join(sorted(failed))
    assert sum(row.get("pass", 0) for row in report["features"].values()) > 0
'''

_README = """# @DIST@

A [tilecore](https://example.invalid/tilecore) backend plugin for **@NAME@**, generated by
`tile new-backend @NAME@`.

## Status

Starting point: the codegen stores the Tile IR and the launcher runs tilecore's
reference interpreter, so the backend is correct (and slow) from the first install.
Replace `tilecore_codegen` and `tilecore_launcher` in `@PKG@/plugin.py` with your
compiler and runtime, and narrow the declared capabilities to what the hardware does.

## Use

```
pip install -e .            # `tile backends` now lists @NAME@
pytest tests                # smoke test + conformance against the reference
tile conformance @NAME@     # the full suite, with a report
```

```python
kernel = tilecore.compile(prim_func, target="@NAME@", out_idx=[-1])
```

## Contract

- entry point: group `tilecore`, `@NAME@ = "@PKG@.plugin"` (pyproject.toml)
- accepted Tile IR versions: @IRV@
- hooks: `tilecore_register_backends`, `tilecore_passes`, `tilecore_codegen`, `tilecore_launcher`
  (optional: `tilecore_layout_rules`, `tilecore_lowering_rules`, `tilecore_intrinsics`,
  `tilecore_cli_commands`)

The walkthrough is tilecore's `docs/writing-a-backend.md`; the worked example is
the `tile-npu` plugin.
"""

_TEMPLATES = {
    "pyproject.toml": _PYPROJECT,
    "README.md": _README,
    "@PKG@/__init__.py": _INIT,
    "@PKG@/plugin.py": _PLUGIN,
    "tests/test_smoke.py": _TEST_SMOKE,
    "tests/test_conformance.py": _TEST_CONFORMANCE,
}


from .new_backend_toolkit import TEMPLATES as _TOOLKIT  # noqa: E402  (the second scaffold's files)

KINDS = {
    "scratch": _TEMPLATES,
    "toolkit": {
        "pyproject.toml": _PYPROJECT.replace('"numpy>=1.24"', '"numpy>=1.24", "apache-tvm>=0.27,<0.28"'),
        "@PKG@/__init__.py": _INIT,
        **_TOOLKIT,
    },
}
