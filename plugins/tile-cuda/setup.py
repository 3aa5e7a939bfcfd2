"""The optional C extension tile_cuda._fastcall (Kernel calls specialized per argument signature, see
tile_cuda/_fastcall.c). It needs only a C compiler and Python's headers, no CUDA; where it cannot be
built the install still succeeds and the launcher's ctypes path is used. Everything else is in
pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("tile_cuda._fastcall", sources=["tile_cuda/_fastcall.c"], extra_compile_args=["-O2"], optional=True)
    ]
)
