"""tile-cuda: the tilecore backend for NVIDIA GPUs (see README.md)."""

__version__ = "0.1.0"
