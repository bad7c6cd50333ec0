"""Model front ends that translate foreign model formats into autotile Symbols.

- :mod:`autotile.frontend.onnx_import` (public entry: :func:`autotile.onnx.load`): ONNX graph
  walk, with per-op converters in the ``onnx_ops*`` families (registered in
  :mod:`~autotile.frontend.onnx_registry`, all loaded by :mod:`~autotile.frontend.onnx_converters`)
  and import-time constant folding in :mod:`~autotile.frontend.onnx_fold`.
"""
