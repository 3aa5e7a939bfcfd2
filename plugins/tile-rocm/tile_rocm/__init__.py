"""tilecore backend "rocm": AMD GPUs through TVM's LLVM AMDGPU codegen and the HIP runtime."""

__version__ = "0.1.0"
