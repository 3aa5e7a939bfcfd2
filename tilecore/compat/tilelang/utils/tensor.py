"""`tilelang.utils.tensor`: array helpers of TileLang's host code."""
from ..host import TensorSupplyType  # noqa: F401
from ..testing import torch_assert_close  # noqa: F401


def map_torch_type(dtype):
    """The torch dtype of a dtype name (`"float16"` -> torch.float16)."""
    from ....language.dtypes import dtype as to_dtype

    return to_dtype(dtype).as_torch()
