"""``autotile bench engines-torch``, run on this checkout: the benchmark lives in the package
(autotile.bench.engines_torch, python/autotile/bench/engines_torch.py) so that it runs where autotile is installed."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (this checkout's python/ first when it has a development build)
from autotile.bench.engines_torch import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
