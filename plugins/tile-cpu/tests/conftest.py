"""The cpu plugin's tests import their shared GEMM cases (cpu_gemm_cases) from this folder."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
