"""The analysis worker: a child process of `tile lsp` that analyses documents one at a time.

Analysis runs the user's definitions and the pass pipeline, which may take long (or
never end, for Python code that loops at parse time), so it runs here, away from the
server's event loop: the server keeps answering the editor, gives each analysis a time
budget and restarts this process when the budget runs out.

Protocol: one JSON object per line on stdin, one answer per line on stdout:
  {"id": 1, "method": "analyze", "path": ..., "text": ..., "target": null}
      -> {"id": 1, "result": model}       ("layouts": false skips layout inference)
  {"id": 2, "method": "warm", "target": "cuda"}                        -> {"id": 2, "result": {...}}
  {"id": 4, "method": "imports", "path": ..., "text": ...}  -> run the document's imports only
  {"id": 3, "method": "status"}                                        -> {"id": 3, "result": {...}}
Failures answer {"id": n, "error": "..."}. Output the user's code prints goes to stderr.

TVM is never imported here: a meta-path finder refuses it (the server's promise that
diagnostics never wait for TVM), and `status` reports whether it was ever loaded.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
import traceback
from typing import Any, Dict

BLOCKED_PACKAGES = ("tvm",)
_blocked_attempts: Dict[str, int] = {}

WARM_KERNEL = """
import tilecore
import tilecore.language as T

@tilecore.jit(out_idx=[-1])
def warm(M=64, N=64, K=64, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(1, num_stages=2):
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(M, N):
                C_f[i, j] = T.exp(C_f[i, j])
            T.copy(C_f, C)
    return main
"""


class RefuseTVM(importlib.abc.MetaPathFinder):
    """Makes `import tvm` fail in the worker: the language server never loads TVM."""

    def find_spec(self, fullname, path=None, target=None):
        """Refuse TVM and its submodules; leave every other import to the next finder."""
        root = fullname.partition(".")[0]
        if root in BLOCKED_PACKAGES:
            _blocked_attempts[root] = _blocked_attempts.get(root, 0) + 1
            raise ModuleNotFoundError(
                f"the tilecore language server does not import {root} (it only "
                f"checks kernels; compiling them needs {root})",
                name=fullname,
            )
        return None


def handle(request: Dict[str, Any]) -> Any:
    """The result of one request (see the module docstring)."""
    method = request.get("method")
    if method == "analyze":
        from .analysis import analyze

        return analyze(request["path"], request["text"], request.get("target"), request.get("layouts", True))
    if method == "imports":
        from .document import run_imports

        return run_imports(request["path"], request["text"])
    if method == "warm":
        from .analysis import analyze

        model = analyze("<tile-lsp-warm-up>", WARM_KERNEL, request.get("target"))
        return {"seconds": model["seconds"], "diagnostics": len(model["diagnostics"])}
    if method == "status":
        return {
            "pid": os.getpid(),
            "tvm_loaded": any(p in sys.modules for p in BLOCKED_PACKAGES),
            "blocked_imports": dict(_blocked_attempts),
        }
    raise ValueError(f"unknown method {method!r}")


def main() -> int:
    """Serve requests until stdin closes."""
    sys.meta_path.insert(0, RefuseTVM())
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the user's code prints must not corrupt the protocol
    sys.stdout = sys.stderr
    if "--nice" in sys.argv:  # the facts worker yields the CPU to the diagnostics worker
        os.nice(int(sys.argv[sys.argv.index("--nice") + 1]))
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = {"id": request.get("id"), "result": handle(request)}
        except Exception as err:  # report, keep serving
            answer = {
                "id": request.get("id"),
                "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(),
            }
        protocol.write(json.dumps(answer) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
