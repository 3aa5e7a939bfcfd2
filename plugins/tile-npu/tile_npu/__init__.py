"""tile-npu: the reference NPU backend of tilecore (own ISA, compiler, assembler, simulator)."""

__version__ = "0.1.0"


def last_report():
    """The cycle report of the most recent NPU launch in this process."""
    from .launcher import last_report as _lr

    return _lr()


def report(kernel):
    """The cycle report of `kernel`'s most recent launch (a tilecore Kernel compiled for npu)."""
    launch = kernel._launcher() if hasattr(kernel, "_launcher") else kernel
    return getattr(launch, "last_report", None)
