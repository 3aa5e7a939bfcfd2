"""Shared helpers for the plugin/runtime/cache/CLI tests (no tests here).

`install_plugin` writes a real distribution (package + .dist-info with
entry_points.txt) into a folder; putting that folder on PYTHONPATH makes
importlib.metadata see the entry point exactly as after `pip install`.
`simple_add_func` / `matrix_func` build Tile IR by hand (no frontend needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tilecore.ir import nodes as N

REPO = Path(__file__).resolve().parents[1]

# A plugin that wraps the reference backend under the name "toy". Environment knobs:
# TOY_COUNTER: file that gets one line per codegen call (to count real compiles);
# TOY_BARRIER=N: codegen waits until N codegens have started (to make concurrent compiles overlap);
# TOY_IR_VERSIONS: comma-separated IR versions it declares; TOY_DEVICE=1: device present.
TOY_PLUGIN = '''
"""A throwaway backend for tests: the reference interpreter under another name."""
import dataclasses
import os
import time

from tilecore.plugin import Backend, ToolchainStatus, hookimpl
from tilecore.interp import plugin as ref


def _backend():
    base = ref.make_backend()
    versions = tuple(os.environ.get("TOY_IR_VERSIONS", "1.0").split(","))
    return Backend(name="toy", targets=("toy", "toy:fast"), ir_versions=versions,
                   capabilities=base.capabilities,
                   toolchain_status=lambda: ToolchainStatus(True, "toy toolchain ready",
                                                            (("compiler", "toycc 1.0"),),
                                                            device="toy device 0"),
                   device_present=lambda: os.environ.get("TOY_DEVICE") == "1",
                   priority=5, description="tests: reference interpreter in disguise")


@hookimpl
def tilecore_register_backends(register):
    register(_backend())


@hookimpl
def tilecore_codegen(backend, module, options):
    if backend.name != "toy":
        return None
    counter = os.environ.get("TOY_COUNTER")
    if counter:
        with open(counter, "a") as f:
            f.write(f"{os.getpid()} {module.target}\\n")
    barrier = int(os.environ.get("TOY_BARRIER", "0"))
    deadline = time.time() + 120
    while barrier and counter and time.time() < deadline:  # wait until N processes are compiling
        with open(counter) as f:
            if len(f.read().splitlines()) >= barrier:
                break
        time.sleep(0.05)
    art = ref.tilecore_codegen(backend=ref.make_backend(), module=module, options=options)
    return dataclasses.replace(art, backend="toy", source="// toy backend\\n" + art.source,
                               blobs={"program.bin": b"\\x00\\x01toy" * 100},
                               meta=dict(art.meta, toy_options=sorted(options)))


@hookimpl
def tilecore_launcher(backend, artifact):
    if backend.name != "toy":
        return None
    assert artifact.blobs["program.bin"] == b"\\x00\\x01toy" * 100
    return ref.tilecore_launcher(backend=ref.make_backend(), artifact=artifact)


@hookimpl
def tilecore_cli_commands(subparsers):
    p = subparsers.add_parser("toy-hello", help="a subcommand added by the toy plugin")
    p.set_defaults(func=lambda args: print("hello from toy") or 0)
'''

BROKEN_PLUGIN = """
raise ImportError("tile_broken needs libbroken.so, which is not installed")
"""


def install_plugin(
    site: Path, dist: str, version: str, package: str, module_text: str, entry_name: str, module: str = "plugin"
) -> None:
    """Write package `package` (with `module`) and a dist-info declaring entry point `entry_name`."""
    pkg = site / package
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / f"{module}.py").write_text(textwrap.dedent(module_text))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[tilecore]\n{entry_name} = {package}.{module}\n")
    (info / "RECORD").write_text("")


def install_toy_and_broken(site: Path) -> Path:
    install_plugin(site, "tile-toy", "0.1.0", "tile_toy", TOY_PLUGIN, "toy")
    install_plugin(site, "tile-broken", "2.3.4", "tile_broken", BROKEN_PLUGIN, "broken")
    return site


def clean_env(tmp: Path, site: Path = None, **extra) -> dict:
    """An environment isolated from the user's config and cache, with `site` on the path.

    Only the test plugins (and the built-in reference) load, whatever else is installed,
    unless `extra` overrides TILECORE_PLUGINS.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILECORE_", "TOY_", "PYTEST_"))}
    paths = [str(site)] if site else []
    paths += [str(REPO / "tests"), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TILECORE_CONFIG"] = str(tmp / "no-config.toml")
    env["TILECORE_CACHE_DIR"] = str(tmp / "cache")
    env["TILECORE_PLUGINS"] = "toy,broken"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(code: str, env: dict, timeout: float = 120, check: bool = True):
    """Run `code` in a fresh interpreter; return the CompletedProcess."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_tile(args, env: dict, timeout: float = 120):
    """Run the `tile` command (as `python -m tilecore.cli`) in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "tilecore.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def last_json(text: str):
    return json.loads(text.strip().splitlines()[-1])


# ---------------------------------------------------------------------- hand-built Tile IR


def f32(v):
    return N.Const(v, "float32")


def i32(v):
    return N.Const(v, "int32")


def simple_add_func(n=64, dtype="float32", block=16) -> N.PrimFunc:
    """C = A + B for 1-D tensors of length `n` (an int, or a str naming a dynamic dim)."""
    dim = N.Var(n, "int32") if isinstance(n, str) else n
    A = N.Buffer("A", (dim,), dtype)
    B = N.Buffer("B", (dim,), dtype)
    C = N.Buffer("C", (dim,), dtype)
    bx = N.Var("bx", "int32")
    i = N.Var("i", "int32")
    g = N.BinOp("+", N.BinOp("*", bx, i32(block), "int32"), i, "int32")
    store = N.Store(C, (g,), N.BinOp("+", N.Load(A, (g,), dtype), N.Load(B, (g,), dtype), dtype))
    if isinstance(n, str):
        grid = N.BinOp("//", N.BinOp("+", dim, i32(block - 1), "int32"), i32(block), "int32")
        body = (N.If(N.BinOp("<", g, dim, "bool"), (store,)),)
    else:
        assert n % block == 0
        grid = i32(n // block)
        body = (store,)
    kernel = N.Kernel((grid,), (bx,), (block,), (N.Parallel((i,), (block,), body),))
    dyn = (dim,) if isinstance(n, str) else ()
    return N.PrimFunc("add", (A, B, C), (kernel,), dyn_vars=dyn)


def matrix_func(m="M", k=8, dtype="float32") -> N.PrimFunc:
    """Y[r, c] = X[r, c] * 2 + W[r, c] with X, W, Y of shape (m, k); one block per row."""
    dim = N.Var(m, "int32") if isinstance(m, str) else m
    X = N.Buffer("X", (dim, k), dtype)
    W = N.Buffer("W", (dim, k), dtype)
    Y = N.Buffer("Y", (dim, k), dtype)
    bx = N.Var("bx", "int32")
    c = N.Var("c", "int32")
    val = N.BinOp(
        "+", N.BinOp("*", N.Load(X, (bx, c), dtype), N.Const(2, dtype), dtype), N.Load(W, (bx, c), dtype), dtype
    )
    kernel = N.Kernel(
        (dim if isinstance(m, str) else i32(m),), (bx,), (32,), (N.Parallel((c,), (k,), (N.Store(Y, (bx, c), val),)),)
    )
    return N.PrimFunc("scale_add", (X, W, Y), (kernel,), dyn_vars=(dim,) if isinstance(m, str) else ())
