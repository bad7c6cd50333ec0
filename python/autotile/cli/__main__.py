"""``python -m autotile.cli``: the ``autotile`` command."""
import sys

from . import main

sys.exit(main())
