"""The error type of autotile: every problem with user input raises :class:`Error`."""


class Error(Exception):
    """Bad input to autotile: the message names the node, op, tensor or shape at fault."""


#: what each optional feature needs from PyPI (the extras of pyproject.toml)
EXTRA_PACKAGES = {
    "onnx": "onnx", "plot": "matplotlib", "mpi": "mpi4py mpich", "jax": "jax", "train": "scikit-learn",
    "torch": "torch onnx onnxscript", "gpu": "'cupy-cuda12x[ctk]'",
}


def install_hint(extra: str) -> str:
    """How to get an optional feature: the packages themselves (autotile is installed from its
    source tree, not from PyPI), then the extra that declares them, e.g. ``pip install
    matplotlib (autotile's 'plot' extra: pip install --no-build-isolation '.[plot]' in its
    source tree)``."""
    return (f"pip install {EXTRA_PACKAGES[extra]} (autotile's '{extra}' extra: "
            f"pip install --no-build-isolation '.[{extra}]' in its source tree)")
