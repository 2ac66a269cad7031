"""`python -m carcassonne`."""

import sys

from .cli import main

sys.exit(main())
