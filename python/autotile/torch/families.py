"""The model families of the PyTorch coverage table (``bench/torch_coverage.py``,
tests/torch/test_coverage_*.py): ``torch.nn`` layers, a ResNet-18 and a MobileNetV3 written
here as small ``nn.Module`` s of the same architecture (torchvision's CPU wheel is not on
PyPI), and Hugging Face ``transformers`` models built from tiny configs with random weights
(no hub download). Each builder returns ``(module, example_inputs)``; the module returns
one tensor (an HF model's ``last_hidden_state`` or ``logits``), so one SGD step of the sum
of its output compares the parallelized module with the plain one."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn

from ..errors import Error

BATCH, SEQ, VOCAB = 8, 8, 64


class Output(nn.Module):
    """An HF model's one output tensor (``key`` of its output, or its first element): the
    coverage modules return a tensor whose sum is the step's loss."""

    def __init__(self, model, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        out = self.model(x)
        return getattr(out, self.key) if hasattr(out, self.key) else out[0]


class EncoderDecoder(Output):
    """An encoder-decoder HF model (T5, BART) called on one token tensor as both the encoder's
    and the decoder's input."""

    def forward(self, x):
        return getattr(self.model(input_ids=x, decoder_input_ids=x), self.key)


class CLIPBoth(nn.Module):
    """CLIP's text and vision towers on one step: the sum of the pooled, projected text
    features' and image features' products (``logits_per_image``)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, pixel_values):
        return self.model(input_ids=input_ids, pixel_values=pixel_values).logits_per_image


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with BatchNorm, a projection shortcut when
    the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's architecture (stem convolution, four stages of two basic blocks, global
    pooling, classifier) at `width` channels in the first stage."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    """MobileNetV3's block: 1x1 expansion, depthwise 3x3, squeeze-excite, 1x1 projection,
    hardswish, a residual when the shape is kept."""

    def __init__(self, cin, cout, expand, stride, se=True):
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                                       nn.BatchNorm2d(mid), nn.Hardswish())
        self.se = SqueezeExcite(mid) if se else nn.Identity()
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    """MobileNetV3-small's architecture in miniature: a hardswish stem, inverted residuals
    with squeeze-excite, a 1x1 head convolution, pooling and a classifier."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(width, width, 2, 1),
                                    InvertedResidual(width, 2 * width, 3, 2),
                                    InvertedResidual(2 * width, 2 * width, 3, 1, se=False))
        self.head = nn.Sequential(nn.Conv2d(2 * width, 4 * width, 1), nn.Hardswish())
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x):
        return self.fc(self.head(self.blocks(self.stem(x))).mean((2, 3)))


class LSTMTagger(nn.Module):
    """``nn.LSTM`` (2 layers, batch first) and a linear read-out of every step."""

    def __init__(self, d=16, hidden=16):
        super().__init__()
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, d)

    def forward(self, x):
        return self.out(self.lstm(x)[0])


class DecoderLayer(nn.Module):
    """``nn.TransformerDecoderLayer`` on a target and a memory sequence."""

    def __init__(self, d=16):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True)

    def forward(self, tgt, memory):
        return self.layer(tgt, memory)


def _tokens():
    return torch.randint(0, VOCAB, (BATCH, SEQ))


def _image(size=16):
    return torch.randn(BATCH, 3, size, size)


def _hf(name: str, **kw):
    try:
        import transformers
    except ImportError:
        raise Error("the Hugging Face families need transformers (pip install transformers)") from None
    return getattr(transformers, name + "Config")(**kw), transformers


_TEXT = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
_DECODER = dict(_TEXT, vocab_size=VOCAB, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)


def _bert(kind="Bert"):
    cfg, t = _hf(kind, vocab_size=VOCAB, max_position_embeddings=32, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, **_TEXT)
    return Output(getattr(t, kind + "Model")(cfg, add_pooling_layer=False), "last_hidden_state"), (_tokens(),)


def _causal(kind, **extra):
    cfg, t = _hf(kind, **_DECODER, **extra)
    return Output(getattr(t, kind + "ForCausalLM")(cfg), "logits"), (_tokens(),)


def _gpt2():
    cfg, t = _hf("GPT2", vocab_size=VOCAB, n_positions=32, n_embd=16, n_layer=1, n_head=2, resid_pdrop=0.0,
                 embd_pdrop=0.0, attn_pdrop=0.0)
    return Output(t.GPT2LMHeadModel(cfg), "logits"), (_tokens(),)


def _t5():
    cfg, t = _hf("T5", vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                 num_heads=2, dropout_rate=0.0, decoder_start_token_id=0)
    return EncoderDecoder(t.T5Model(cfg), "last_hidden_state"), (_tokens(),)


def _bart():
    cfg, t = _hf("Bart", vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                 max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    return EncoderDecoder(t.BartModel(cfg), "last_hidden_state"), (_tokens(),)


def _vit():
    cfg, t = _hf("ViT", image_size=16, patch_size=4, num_channels=3, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, **_TEXT)
    return Output(t.ViTModel(cfg, add_pooling_layer=False), "last_hidden_state"), (_image(),)


def _clip():
    cfg, t = _hf("CLIP", text_config=dict(vocab_size=VOCAB, max_position_embeddings=SEQ, **_TEXT),
                 vision_config=dict(image_size=16, patch_size=4, **_TEXT), projection_dim=16)
    return CLIPBoth(t.CLIPModel(cfg)), (_tokens(), _image())


def _whisper():
    cfg, t = _hf("Whisper", vocab_size=VOCAB, num_mel_bins=8, d_model=16, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                 max_source_positions=SEQ, max_target_positions=SEQ, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, decoder_start_token_id=1, dropout=0.0, attention_dropout=0.0,
                 activation_dropout=0.0)
    # the encoder's two convolutions halve the frames: 2 * max_source_positions mel frames
    return Output(t.WhisperModel(cfg).encoder, "last_hidden_state"), (torch.randn(BATCH, 8, 2 * SEQ),)


def _swin():
    cfg, t = _hf("Swin", image_size=16, patch_size=2, num_channels=3, embed_dim=8, depths=[1, 1], num_heads=[2, 2],
                 window_size=4, mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 drop_path_rate=0.0)
    return Output(t.SwinModel(cfg, add_pooling_layer=False), "last_hidden_state"), (_image(),)


def _encoder_layer():
    return nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), (torch.randn(BATCH, SEQ, 16),)


#: family -> builder of (module, example inputs); random weights from the torch seed in force
FAMILIES: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "nn.TransformerEncoderLayer": _encoder_layer,
    "nn.TransformerDecoderLayer": lambda: (DecoderLayer(), (torch.randn(BATCH, SEQ, 16), torch.randn(BATCH, SEQ, 16))),
    "nn.LSTM": lambda: (LSTMTagger(), (torch.randn(BATCH, SEQ, 16),)),
    "ResNet-18": lambda: (ResNet18(), (_image(),)),
    "MobileNetV3": lambda: (MobileNetV3(), (_image(),)),
    "BERT": _bert,
    "RoBERTa": lambda: _bert("Roberta"),
    "GPT-2": _gpt2,
    "LLaMA (GQA)": lambda: _causal("Llama"),
    "Mistral": lambda: _causal("Mistral", sliding_window=None),
    "Qwen2": lambda: _causal("Qwen2"),
    "Gemma": lambda: _causal("Gemma", head_dim=8),
    "T5": _t5,
    "BART": _bart,
    "ViT": _vit,
    "CLIP (text + vision)": _clip,
    "Whisper encoder": _whisper,
    "Swin": _swin,
}


def build(family: str, seed: int = 0):
    """``(module, example_inputs)`` of `family` (a key of :data:`FAMILIES`), weights drawn from
    `seed`; train mode with no dropout."""
    if family not in FAMILIES:
        raise Error(f"unknown coverage family '{family}' (choose from {', '.join(FAMILIES)})")
    torch.manual_seed(seed)
    module, inputs = FAMILIES[family]()
    return module.train(), inputs
