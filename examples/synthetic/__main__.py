"""``python -m tracegraph.examples.synthetic``: see `cli`."""

import sys

from .cli import main

sys.exit(main())
