"""tile-cpu: the tilecore backend for the host CPU (TVM TIR -> LLVM).

The plugin module is `tile_cpu.plugin` (entry point `cpu` in the group
"tilecore"); importing this package does not import TVM.
"""

__version__ = "0.1.0"
