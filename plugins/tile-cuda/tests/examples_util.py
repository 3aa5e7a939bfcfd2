"""Build the repository's examples (examples/*.py) for the cuda backend."""

import importlib
import os
import sys

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))


def example(name):
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.import_module(name)


# (module, factory, args, kwargs) covering every example kernel, partial tiles included
CASES = [
    ("gemm", "matmul", (512, 512, 512), {}),
    ("gemm", "matmul", (200, 200, 200, 64, 64, 32), {"dtype": "float32", "accum": "float32"}),
    ("gemm", "matmul", (128, 128, 128, 64, 64, 32), {"dtype": "bfloat16"}),
    ("softmax", "softmax", (256, 512, 32), {}),
    ("softmax", "softmax", (128, 256, 16), {"dtype": "float16"}),
    ("layernorm", "layernorm", (70, 768, 16), {}),
    ("flash_attention", "flashattn", (1, 2, 256, 64, True), {}),
    ("flash_attention", "flashattn", (1, 2, 200, 64, False), {}),
]


def prim_func(module, factory, args, kwargs):
    fac = getattr(example(module), factory)
    return fac.prim_func(*args, **kwargs), fac.out_idx
