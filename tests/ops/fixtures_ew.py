"""Access to the MXNet 1.9.1 fixtures of tests/fixtures/ops_elemwise (made by generate.py)."""
import json
import os

import numpy as np

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "ops_elemwise",
                    "mxnet_fixtures.npz")
_cache = {}


def case(name):
    """(attrs dict incl. 'op', {field: array}) of one fixture case."""
    if not _cache:
        with np.load(PATH) as f:
            _cache.update({k: f[k] for k in f.files})
    attrs = json.loads(str(_cache[f"{name}/attrs"]))
    arrays = {k.split("/", 1)[1]: v for k, v in _cache.items() if k.startswith(name + "/") and not k.endswith("/attrs")}
    return attrs, arrays


def cases(prefix):
    case("sgd_plain")  # loads the file
    return sorted({k.split("/", 1)[0] for k in _cache if k.startswith(prefix)})
