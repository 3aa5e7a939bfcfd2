"""`python -m tilecore.cli` runs the `tile` command."""

import sys

from .main import main

sys.exit(main())
