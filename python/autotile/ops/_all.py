"""Imports every operator family module in this package so that they register their ops."""
import importlib
import pkgutil

from . import __path__ as _pkg_path

for _info in sorted(pkgutil.iter_modules(_pkg_path), key=lambda m: m.name):
    if not _info.name.startswith("_") and _info.name not in ("registry", "grad", "tdl_helpers"):
        importlib.import_module(f"{__package__}.{_info.name}")
