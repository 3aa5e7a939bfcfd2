"""Outputs allocated without an input array to copy the library from land on the device that holds
the backend's memory space (torch's name for it), or fail naming the memory space."""

import pytest

from tilecore.runtime import arrays


def test_a_memory_space_without_an_array_library_is_a_clear_error():
    make = arrays.allocator(None, (4,), "float32", "vulkan", zeroed=True)
    with pytest.raises(arrays.NotAnArray, match="in vulkan memory"):
        make()


def test_metal_outputs_are_asked_of_torch_on_mps_not_cuda():
    torch = pytest.importorskip("torch")
    make = arrays.allocator(None, (4,), "float32", "metal", zeroed=True)
    if torch.backends.mps.is_available():
        assert make().device.type == "mps"
    else:  # torch refuses the device it was asked for; before, it was asked for "cuda"
        with pytest.raises(RuntimeError, match="(?i)mps"):
            make()
