"""float32 kernels against the same kernels in float64 (the precision oracle of op tests)."""
import numpy as np

import autotile as at
from autotile.ops.registry import KernelContext, format_value


def assert_float32_tracks_float64(op_name, attrs, inputs, rel):
    """`op_name`'s kernel on float32 copies of the float64 `inputs` returns float32 within
    `rel` times each output's largest magnitude of the float64 result."""
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: format_value(v) for k, v in attrs.items()})
    want = op.forward(parsed, list(inputs), KernelContext())
    got = op.forward(parsed, [x.astype(np.float32) for x in inputs], KernelContext())
    for g, w in zip(got, want):
        assert g.dtype == np.float32, op_name
        np.testing.assert_allclose(g, w, rtol=0, atol=rel * np.abs(w).max(), err_msg=op_name)
