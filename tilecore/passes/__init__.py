"""Target-agnostic passes over Tile IR, one per module, ordered by `pipeline`.

check_types (shape/type diagnostics), int4_storage (int4 as packed int8),
simplify (exact constant folding),
bounds (proves tile copies in bounds), check_features (backend capabilities),
liveness + memory_plan (block-local memory against device limits),
layout_inference (fixpoint engine over backend-supplied rules).
"""

from .pipeline import POINTS, PassContext, Pipeline, default_pipeline  # noqa: F401
