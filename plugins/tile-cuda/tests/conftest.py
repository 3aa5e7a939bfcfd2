import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def _gpu():
    from tile_cuda import toolchain

    return toolchain.device_present()


def pytest_collection_modifyitems(config, items):
    if _gpu():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU on this machine (the compile tier still runs)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
