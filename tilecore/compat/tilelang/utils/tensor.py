"""`tilelang.utils.tensor`: array helpers of TileLang's host code."""

from types import SimpleNamespace

from ..host import TensorSupplyType  # noqa: F401
from ..testing import torch_assert_close  # noqa: F401


def map_torch_type(dtype):
    """The torch dtype of a dtype name (`"float16"` -> torch.float16)."""
    from ....language.dtypes import dtype as to_dtype

    return to_dtype(dtype).as_torch()


def get_tensor_supply(supply_type=TensorSupplyType.Integer):
    """A function making a torch tensor for a kernel parameter (anything with static `.shape`
    and `.dtype`), filled as `supply_type` says: Integer small integers, Uniform/Auto floats in
    [-1, 1) (integers in [-2, 3), unsigned in [0, 3)), Normal/Randn standard normal, Zero, One."""
    import torch

    from ....ir.types import is_float, is_int4

    def make(param):
        shape = [int(d) for d in param.shape]  # a T.dynamic dim has no size: int() raises
        if is_int4(str(param.dtype)):  # the packed int8 tensor of int4 values drawn as int8 ones
            from ....testing import pack_int4

            return pack_int4(make(SimpleNamespace(shape=param.shape, dtype="int8")))
        dtype = map_torch_type(param.dtype)
        floating = is_float(str(param.dtype))
        if supply_type == TensorSupplyType.Zero:
            return torch.zeros(shape, dtype=dtype)
        if supply_type == TensorSupplyType.One:
            return torch.ones(shape, dtype=dtype)
        if not floating or supply_type == TensorSupplyType.Integer:
            low, high = (
                (0, 2) if str(param.dtype) == "bool" else (0, 3) if str(param.dtype).startswith("uint") else (-2, 3)
            )
            return torch.randint(low, high, shape).to(dtype)
        if supply_type in (TensorSupplyType.Normal, TensorSupplyType.Randn):
            return torch.randn(shape).to(dtype)
        return (torch.rand(shape) * 2 - 1).to(dtype)

    return make
