"""``python -m autotile``: the same command line as the ``autotile`` script."""
import sys

from .cli import main

sys.exit(main())
