"""What the CLI's MODEL names: a model file (``.onnx``, ``-symbol.json``) or a zoo name, with
errors that say which it was taken for (no such file and the close files beside it; an
unknown zoo name and the close zoo names), and ``--shape`` for ONNX inputs."""
from __future__ import annotations

import difflib
import os
from typing import List

from ..errors import Error

def zoo_names() -> List[str]:
    """Concrete names the zoo builds (one per family member), for close-match suggestions."""
    from ..models.bert import BERT_SIZES
    from ..models.gpt2 import GPT2_SIZES
    from ..models.llama import LLAMA_SIZES
    from ..models.vgg import VGG_LAYERS
    from ..models.vit import VIT_SIZES
    from ..models.wresnet import RESNET_UNITS

    names = ["mlp", "mlp-digits", "cnn-digits", "mlp-5-300", "alexnet", "vgg16_bn", "wresnet-152-10", "rnn-10-8k",
             "transformer", "transformer-262144-256"]
    names += [f"vgg{d}" for d in sorted(VGG_LAYERS)] + [f"resnet{d}" for d in sorted(RESNET_UNITS)]
    names += [f"{family}-{size}" for family, sizes in (("gpt2", GPT2_SIZES), ("bert", BERT_SIZES),
                                                        ("llama", LLAMA_SIZES), ("vit", VIT_SIZES))
              for size in sizes]
    return names


def _looks_like_file(text: str) -> bool:
    """A path or a file name (zoo names have no '/' and no '.')."""
    return os.sep in text or "." in os.path.basename(text)


def check_model_name(text: str) -> None:
    """Error for a MODEL that names neither an existing file nor a zoo model it could be
    taken for: a path that does not exist ('no such file', with the close files in its
    directory), else nothing (the zoo decides)."""
    if os.path.exists(text) or not _looks_like_file(text):
        return
    folder = os.path.dirname(text) or "."
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        entries = []
    close = difflib.get_close_matches(os.path.basename(text), entries, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(os.path.join(os.path.dirname(text), c)) for c in close)}?" if close else ""
    raise Error(f"no such file '{text}'{hint}")


def unknown_model(name: str) -> Error:
    """The Error of a zoo name the zoo does not build, with the close zoo names."""
    from ..models.zoo import known_names

    close = difflib.get_close_matches(name.strip().lower(), zoo_names(), n=4, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    return Error(f"unknown model '{name}'{hint} (zoo: {'; '.join(known_names())}; or an .onnx / -symbol.json file)")


def _zoo(name: str, batch, seq):
    from .. import models

    try:
        return models.get(name, batch=batch, **({"seq": seq} if seq is not None else {}))
    except TypeError as e:
        if "seq" not in str(e):
            raise
        raise Error(f"model '{name}' takes no sequence length (--seq is for sequence models such as "
                    f"gpt2-small, bert-base, llama-7b)") from None
    except Error as e:  # a name the zoo's patterns take but its builders refuse: resnet18, vgg12
        if str(e).startswith("unknown model") or "must be one of" in str(e):
            raise unknown_model(name) from None
        raise


def load_model(args):
    """The Symbol of ``args.model`` sized by --batch, --seq (zoo sequence models) and --shape
    (ONNX inputs). Errors: a file that does not exist, a zoo name the zoo does not build (both
    with close matches), --seq or --shape for a model that takes none, and a --shape that
    does not fit the model (naming that input, not a weight)."""
    text = args.model
    seq = getattr(args, "seq", None)
    shapes = dict(getattr(args, "shape", None) or [])
    is_file = os.path.exists(text) or text.endswith((".onnx", ".json"))
    if seq is not None and is_file:
        raise Error(f"--seq sizes zoo models; '{text}' is a file, whose shapes are its own")
    check_model_name(text)
    if shapes and not text.endswith(".onnx"):
        raise Error(f"--shape sets the inputs of an .onnx file; '{text}' is "
                    f"{'a file' if is_file else 'a zoo model'} (size zoo models with --batch and --seq)")
    if not is_file:
        return _zoo(text, args.batch, seq)
    if not shapes:
        from ..model_input import as_symbol

        sym = as_symbol(text, batch=args.batch)
    else:
        from .. import onnx as at_onnx

        sym = at_onnx.load(text, batch_size=args.batch, shapes=shapes)
    if text.endswith(".onnx"):
        _check_shapes(sym, shapes)
    return sym


def _check_shapes(sym, shapes) -> None:
    """Shape inference of an ONNX model with the --shape inputs: an Error leads with those
    inputs, and names the inputs whose dims stay symbolic."""
    from ..symbol.infer import infer_entry_shapes

    try:
        known = infer_entry_shapes(sym, {}, partial=True)
    except Error as e:
        if not shapes:
            raise
        given = ", ".join(f"'{n}' {tuple(s)}" for n, s in shapes.items())
        raise Error(f"--shape: input {given} does not fit the model: {e}") from None
    open_inputs = [n for n in sym.topo_nodes() if n.is_variable and n.name not in sym.params
                   and known.get((id(n), 0)) is None]
    if open_inputs:  # an export with symbolic dims (dynamic axes): say which input to size
        names = [n.attrs.get("__onnx_name__", n.name) for n in open_inputs]
        raise Error(f"input{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)} of the model "
                    f"{'have' if len(names) > 1 else 'has'} symbolic dims: give "
                    f"{' '.join(f'--shape {n}=DIMS' for n in names)} (e.g. --shape {names[0]}=1x3x224x224)")
