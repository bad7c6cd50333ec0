"""Blocks real architectures are built from, in small, for the architecture fuzzer
(tests/execgraph/test_arch_fuzzer.py): MobileNet's inverted residual (depthwise conv,
squeeze-excitation), RegNet's Y-block, ConvNeXt's block (LayerNorm over channels, layer
scale), Swin's shifted-window attention (roll as slice + concat, window partition by
reshape/transpose, shift mask), U-Net's down/up with skip concatenation (nearest upsampling
by reshape + broadcast_to, GroupNorm), Transformer blocks (padding and causal masks, rotary
embeddings, ALiBi biases, grouped-query attention, dropout, LayerNorm or RMSNorm, GELU or
SwiGLU MLP), ALBERT's shared layer and TCN's causal dilated Conv1d. Norms, softmax and GELU
are drawn either as the op or written out in elementary ops, as exporters write them.

A :class:`NetBuilder` draws each block's configuration from its random generator, tracks
the running tensor's shape, and collects the non-trainable inputs blocks need (masks,
rotary tables, ALiBi slopes, index tables), each marked as data with its float64 value."""
from __future__ import annotations

import numpy as np

import autotile as at

S = at.sym


class NetBuilder:
    """Builds one random graph: `rng` draws the configurations, `consts` maps each data
    input a block added (besides ``data`` and the label) to its value."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.count = 0
        self.consts = {}
        self.const_syms = {}
        self.params = {}
        self.share_as = None  # while set, blocks name their weights after it (shared layers)
        self.blocks = []

    def name(self, kind: str) -> str:
        self.count += 1
        self.blocks.append(kind)
        return f"{kind}{self.count}"

    def param(self, name: str, shape=None):
        """The weight Variable `name`, one per name: blocks sharing a name share the weight."""
        if name not in self.params:
            self.params[name] = S.Variable(name, shape=shape)
        return self.params[name]

    def fc(self, x, hidden: int, p: str, pp: str, suffix: str):
        """FullyConnected over the last axis, node f"{p}_{suffix}", weights named after `pp`."""
        return S.FullyConnected(x, weight=self.param(f"{pp}_{suffix}_weight"), bias=self.param(f"{pp}_{suffix}_bias"),
                                num_hidden=hidden, flatten=False, name=f"{p}_{suffix}")

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def const(self, name: str, value: np.ndarray):
        """A non-trainable input (marked as data) holding `value`, created once per name."""
        if name not in self.consts:  # one Variable per name: every block that needs it shares it
            self.consts[name] = np.asarray(value, dtype=np.float64)
            self.const_syms[name] = S.Variable(name, attr={"__data__": "1"})
        return self.const_syms[name]


# ---------------------------------------------------------------- the same layer, as exporters write it

def norm(nb: NetBuilder, x, axis: int, ndim: int, c: int, p: str, rms_ok: bool = True, pp=None):
    """Normalisation over `axis` of an `ndim`-d tensor: the LayerNorm or RMSNorm op, or either
    written out in elementary ops as ConvNeXt's channels-first LayerNorm and LLaMA's exports
    are (mean, subtract, square, sqrt, divide or reciprocal, scale and shift). Its weights
    are named after `pp` (default `p`)."""
    kind = nb.choice(["layer", "layer_ops", "rms", "rms_ops"] if rms_ok else ["layer", "layer_ops"])
    pp = pp or p
    if kind == "layer":
        return S.LayerNorm(x, nb.param(f"{pp}_gamma"), nb.param(f"{pp}_beta"), axis=axis, name=p)
    if kind == "rms":
        return S.RMSNorm(x, nb.param(f"{pp}_gamma"), axis=axis, name=p)
    param_shape = tuple(c if d == axis % ndim else 1 for d in range(ndim))
    if kind == "layer_ops":
        x = S.broadcast_sub(x, S.mean(x, axis=axis, keepdims=True, name=f"{p}_mu"), name=f"{p}_centre")
        var = S.mean(S.square(x, name=f"{p}_sq"), axis=axis, keepdims=True, name=f"{p}_var")
        x = S.broadcast_div(x, S.sqrt(var + 1e-5, name=f"{p}_std"), name=f"{p}_normed")
    else:
        ms = S.mean(x * x, axis=axis, keepdims=True, name=f"{p}_ms")
        x = S.broadcast_mul(x, S.reciprocal(S.sqrt(ms + 1e-6, name=f"{p}_rms"), name=f"{p}_inv"), name=f"{p}_normed")
    x = S.broadcast_mul(x, nb.param(f"{pp}_gamma", param_shape), name=f"{p}_scaled")
    if kind == "layer_ops":
        x = S.broadcast_add(x, nb.param(f"{pp}_beta", param_shape), name=f"{p}_shifted")
    return x


def softmax(nb: NetBuilder, a, p: str):
    """Softmax over the last axis: the op, exp(log_softmax), or written out with the row
    maximum subtracted (max with its gradient blocked, exp, sum, divide)."""
    kind = nb.choice(["op", "log", "ops"])
    if kind == "op":
        return S.softmax(a, axis=-1, name=p)
    if kind == "log":
        return S.exp(S.log_softmax(a, axis=-1, name=f"{p}_log"), name=p)
    top = S.BlockGrad(S.max(a, axis=-1, keepdims=True, name=f"{p}_max"), name=f"{p}_max_nograd")
    e = S.exp(S.broadcast_sub(a, top, name=f"{p}_shift"), name=f"{p}_exp")
    return S.broadcast_div(e, S.sum(e, axis=-1, keepdims=True, name=f"{p}_sum"), name=p)


def gelu(nb: NetBuilder, x, p: str):
    """GELU: the op (exact or tanh), or the tanh approximation written out."""
    kind = nb.choice(["none", "tanh", "ops"])
    if kind != "ops":
        return S.gelu(x, approximate=kind, name=p)
    inner = (x + S._power_scalar(x, scalar=3.0, name=f"{p}_cube") * 0.044715) * float(np.sqrt(2 / np.pi))
    return x * 0.5 * (S.tanh(inner, name=f"{p}_tanh") + 1.0)


def swap_heads(nb: NetBuilder, x, p: str):
    """(N, A, B, D) -> (N, B, A, D) by transpose or SwapAxis."""
    if nb.choice(["transpose", "swap"]) == "transpose":
        return S.transpose(x, axes=(0, 2, 1, 3), name=p)
    return S.SwapAxis(x, dim1=1, dim2=2, name=p)


# ---------------------------------------------------------------- image blocks (N, C, H, W)

def _conv(h, c, p, kernel=1, stride=1, groups=1, pad=None, bias=True):
    pad = kernel // 2 if pad is None else pad
    return S.Convolution(h, kernel=(kernel, kernel), stride=(stride, stride), pad=(pad, pad), num_filter=c,
                         num_group=groups, no_bias=not bias, name=p)


def _bn(h, p):
    return S.BatchNorm(h, fix_gamma=False, name=p)


def squeeze_excite(h, c, squeeze, p, gate="sigmoid", mean=False):
    """Global average pool (Pooling or mean over H, W), 1x1 conv down, relu, 1x1 conv up,
    gate, multiplied back onto `h`."""
    if mean:
        s = S.mean(h, axis=(2, 3), keepdims=True, name=f"{p}_pool")
    else:
        s = S.Pooling(h, global_pool=True, pool_type="avg", kernel=(1, 1), name=f"{p}_pool")
    s = S.Activation(_conv(s, squeeze, f"{p}_fc1"), act_type="relu", name=f"{p}_relu")
    s = _conv(s, c, f"{p}_fc2")
    s = S.hard_sigmoid(s, name=f"{p}_gate") if gate == "hard" else S.Activation(s, act_type="sigmoid",
                                                                                  name=f"{p}_gate")
    return S.broadcast_mul(h, s, name=f"{p}_mul")


def inverted_residual(nb: NetBuilder, h, shape):
    """MobileNetV2/V3: 1x1 expand, BN, relu6 or hard-swish, depthwise kxk (stride 1 or 2),
    BN, optional squeeze-excitation, 1x1 project, BN, residual when the shape is kept."""
    p = nb.name("ir")
    n, c, hh, ww = shape
    e = c * nb.choice([2, 3])
    k = nb.choice([3, 5])
    stride = nb.choice([1, 2]) if hh % 2 == 0 and ww % 2 == 0 and hh > 2 else 1
    out_c = nb.choice([c, c + c // 2]) if stride == 1 else c
    act = nb.choice(["relu6", "hswish"])

    def activate(x, q):
        return S.clip(x, a_min=0.0, a_max=6.0, name=q) if act == "relu6" else S.hard_swish(x, name=q)

    x = activate(_bn(_conv(h, e, f"{p}_expand", bias=False), f"{p}_bn1"), f"{p}_act1")
    x = activate(_bn(_conv(x, e, f"{p}_dw", kernel=k, stride=stride, groups=e, bias=False), f"{p}_bn2"), f"{p}_act2")
    if nb.choice([True, False]):
        x = squeeze_excite(x, e, max(2, e // 4), f"{p}_se", gate=nb.choice(["sigmoid", "hard"]),
                           mean=nb.choice([True, False]))
    x = _bn(_conv(x, out_c, f"{p}_project", bias=False), f"{p}_bn3")
    if stride == 1 and out_c == c:
        x = S.elemwise_add(x, h, name=f"{p}_add")
    return x, (n, out_c, hh // stride, ww // stride)


def regnet_y(nb: NetBuilder, h, shape):
    """RegNet's Y-block: 1x1 conv BN relu, grouped 3x3 conv (stride 1 or 2) BN relu,
    squeeze-excitation, 1x1 conv BN, shortcut (1x1 strided conv BN when the shape changes),
    add, relu."""
    p = nb.name("ry")
    n, c, hh, ww = shape
    width = nb.choice([2, 3, 4])
    groups = nb.choice([2, 3])
    mid = width * groups
    stride = nb.choice([1, 2]) if hh % 2 == 0 and ww % 2 == 0 and hh > 2 else 1
    out_c = nb.choice([c, 2 * c]) if stride == 1 else 2 * c
    x = S.Activation(_bn(_conv(h, mid, f"{p}_a", bias=False), f"{p}_a_bn"), act_type="relu", name=f"{p}_a_relu")
    x = _bn(_conv(x, mid, f"{p}_b", kernel=3, stride=stride, groups=groups, bias=nb.choice([True, False])),
            f"{p}_b_bn")
    x = S.Activation(x, act_type="relu", name=f"{p}_b_relu")
    x = squeeze_excite(x, mid, max(2, c // 4), f"{p}_se", mean=nb.choice([True, False]))
    x = _bn(_conv(x, out_c, f"{p}_c", bias=False), f"{p}_c_bn")
    short = h if stride == 1 and out_c == c else _bn(_conv(h, out_c, f"{p}_proj", stride=stride, bias=False),
                                                        f"{p}_proj_bn")
    x = S.Activation(S.elemwise_add(x, short, name=f"{p}_add"), act_type="relu", name=f"{p}_relu")
    return x, (n, out_c, hh // stride, ww // stride)


def convnext(nb: NetBuilder, h, shape):
    """ConvNeXt: depthwise kxk conv, LayerNorm over channels (axis 1 of NCHW, or the last axis
    after a permute to NHWC with Linear layers as the reference code does), 4x pointwise
    expand, GELU, project, layer scale, optional stochastic depth, residual; optionally the
    downsampling layer after it (LayerNorm over channels, 2x2 stride-2 conv, 2x channels)."""
    p = nb.name("cnx")
    n, c, hh, ww = shape
    k = nb.choice([3, 5, 7])
    x = _conv(h, c, f"{p}_dw", kernel=k, groups=c)
    if nb.choice(["nchw", "nhwc"]) == "nchw":
        x = norm(nb, x, 1, 4, c, f"{p}_ln", rms_ok=False)
        x = gelu(nb, _conv(x, 4 * c, f"{p}_pw1"), f"{p}_gelu")
        x = _conv(x, c, f"{p}_pw2")
        gamma = S.Variable(f"{p}_scale", shape=(1, c, 1, 1))
    else:
        x = S.transpose(x, axes=(0, 2, 3, 1), name=f"{p}_to_nhwc")
        x = norm(nb, x, -1, 4, c, f"{p}_ln", rms_ok=False)
        x = gelu(nb, S.FullyConnected(x, num_hidden=4 * c, flatten=False, name=f"{p}_pw1"), f"{p}_gelu")
        x = S.FullyConnected(x, num_hidden=c, flatten=False, name=f"{p}_pw2")
        x = S.transpose(x, axes=(0, 3, 1, 2), name=f"{p}_to_nchw")
        gamma = S.Variable(f"{p}_scale", shape=(1, c, 1, 1))
    x = S.broadcast_mul(x, gamma, name=f"{p}_layer_scale")
    if nb.choice([True, False]):  # stochastic depth (timm's DropPath): one draw per sample
        x = S.Dropout(x, p=0.5, axes=(1, 2, 3), name=f"{p}_drop_path")
    x = S.elemwise_add(x, h, name=f"{p}_add")
    if nb.choice([True, False]) and hh % 2 == 0 and ww % 2 == 0:  # ConvNeXt's downsampling layer
        x = norm(nb, x, 1, 4, c, f"{p}_down_ln", rms_ok=False)
        x = _conv(x, 2 * c, f"{p}_down", kernel=2, stride=2, pad=0)
        return x, (n, 2 * c, hh // 2, ww // 2)
    return x, shape


def _roll(x, shape, shift, axis, p):
    """torch.roll(x, -shift, axis) as two slices + concat (how exporters write it); the
    slices as slice_axis, or as slice with a begin and end per dim when `shape` is given."""
    if shape is None:
        head = S.slice_axis(x, axis=axis, begin=0, end=shift, name=f"{p}_head")
        tail = S.slice_axis(x, axis=axis, begin=shift, end=None, name=f"{p}_tail")
    else:
        begin, end = [0] * len(shape), list(shape)
        head = S.slice(x, begin=tuple(begin), end=tuple(end[:axis] + [shift] + end[axis + 1:]), name=f"{p}_head")
        tail = S.slice(x, begin=tuple(begin[:axis] + [shift] + begin[axis + 1:]), end=tuple(end), name=f"{p}_tail")
    return S.Concat(tail, head, dim=axis, name=f"{p}_cat")


def _swin_shift_mask(hh, ww, w, s):
    """Swin's attention mask for shifted windows: -100 between tokens that came from
    different regions of the unshifted map, per window (nW, N, N)."""
    region = np.zeros((hh, ww))
    cnt = 0
    for hs in (slice(0, -w), slice(-w, -s), slice(-s, None)):
        for ws in (slice(0, -w), slice(-w, -s), slice(-s, None)):
            region[hs, ws] = cnt
            cnt += 1
    win = region.reshape(hh // w, w, ww // w, w).transpose(0, 2, 1, 3).reshape(-1, w * w)
    return np.where(win[:, None, :] != win[:, :, None], -100.0, 0.0)


def _relative_bias(nb: NetBuilder, p, w, heads):
    """Swin's relative position bias (1, heads, N, N): a learned table of (2w-1)^2 rows
    gathered by each token pair's relative offset (take: repeated indices, so its gradient
    accumulates), or a learned (1, heads, N, N) tensor."""
    t = w * w
    if nb.choice(["table", "dense"]) == "dense":
        return S.Variable(f"{p}_relbias", shape=(1, heads, t, t))
    yx = np.stack(np.meshgrid(np.arange(w), np.arange(w), indexing="ij")).reshape(2, -1)
    rel = yx[:, :, None] - yx[:, None, :] + (w - 1)
    index = nb.const(f"relpos_index{w}", (rel[0] * (2 * w - 1) + rel[1]).reshape(-1))
    table = S.Variable(f"{p}_reltable", shape=((2 * w - 1) ** 2, heads))
    bias = S.reshape(S.take(table, index, axis=0, name=f"{p}_relgather"), shape=(t, t, heads), name=f"{p}_relr")
    return S.reshape(S.transpose(bias, axes=(2, 0, 1), name=f"{p}_relt"), shape=(1, heads, t, t),
                     name=f"{p}_relbias")


def swin_window_attention(nb: NetBuilder, h, shape):
    """Swin: LayerNorm, cyclic shift (roll), window partition, multi-head attention with a
    relative position bias per head and the shift mask, window merge, reverse shift,
    residual; then LayerNorm + GELU MLP, residual. Works in NHWC, returns NCHW."""
    p = nb.name("swin")
    n, c, hh, ww = shape
    w = nb.choice([v for v in (2, 3, 4) if hh % v == 0 and ww % v == 0 and v < max(hh, ww)] or [hh])
    shift = nb.choice([0, w // 2]) if w > 1 else 0
    heads = nb.choice([v for v in (1, 2, 3) if c % v == 0])
    d, nw, t = c // heads, (hh // w) * (ww // w), w * w
    x = S.transpose(h, axes=(0, 2, 3, 1), name=f"{p}_nhwc")
    y = norm(nb, x, -1, 4, c, f"{p}_ln1", rms_ok=False)
    nhwc = nb.choice([None, (n, hh, ww, c)])
    if shift:
        y = _roll(_roll(y, nhwc, shift, 1, f"{p}_rollh"), nhwc, shift, 2, f"{p}_rollw")
    y = S.reshape(y, shape=(n, hh // w, w, ww // w, w, c), name=f"{p}_win_r")
    y = S.transpose(y, axes=(0, 1, 3, 2, 4, 5), name=f"{p}_win_t")
    y = S.reshape(y, shape=(n * nw, t, c), name=f"{p}_win")

    def heads_of(z, q):
        z = S.reshape(S.FullyConnected(z, num_hidden=c, flatten=False, name=q), shape=(n * nw, t, heads, d),
                      name=f"{q}_r")
        return S.transpose(z, axes=(0, 2, 1, 3), name=f"{q}_t")

    q, k, v = (heads_of(y, f"{p}_{z}") for z in "qkv")
    a = S.batch_dot(q, k, transpose_b=True, name=f"{p}_qk") * (1.0 / np.sqrt(d))
    a = S.broadcast_add(a, _relative_bias(nb, p, w, heads), name=f"{p}_rel")
    if shift:
        mask = nb.const(f"{p}_mask", _swin_shift_mask(hh, ww, w, shift).reshape(1, nw, 1, t, t))
        a = S.reshape(a, shape=(n, nw, heads, t, t), name=f"{p}_a5")
        a = S.reshape(S.broadcast_add(a, mask, name=f"{p}_masked"), shape=(n * nw, heads, t, t), name=f"{p}_a4")
    a = softmax(nb, a, f"{p}_softmax")
    y = swap_heads(nb, S.batch_dot(a, v, name=f"{p}_av"), f"{p}_merge_t")
    y = S.FullyConnected(S.reshape(y, shape=(n * nw, t, c), name=f"{p}_merge_r"), num_hidden=c, flatten=False,
                         name=f"{p}_proj")
    y = S.reshape(y, shape=(n, hh // w, ww // w, w, w, c), name=f"{p}_unwin_r")
    y = S.reshape(S.transpose(y, axes=(0, 1, 3, 2, 4, 5), name=f"{p}_unwin_t"), shape=(n, hh, ww, c),
                  name=f"{p}_unwin")
    if shift:
        y = _roll(_roll(y, nhwc, hh - shift, 1, f"{p}_unrollh"), nhwc, ww - shift, 2, f"{p}_unrollw")
    x = S.elemwise_add(x, y, name=f"{p}_res1")
    y = norm(nb, x, -1, 4, c, f"{p}_ln2", rms_ok=False)
    y = S.FullyConnected(gelu(nb, S.FullyConnected(y, num_hidden=2 * c, flatten=False, name=f"{p}_fc1"),
                              f"{p}_gelu"), num_hidden=c, flatten=False, name=f"{p}_fc2")
    x = S.elemwise_add(x, y, name=f"{p}_res2")
    return S.transpose(x, axes=(0, 3, 1, 2), name=f"{p}_nchw"), shape


def upsample_nearest(x, shape, p):
    """2x nearest upsampling without a Resize op: (N,C,H,1,W,1) broadcast to (N,C,H,2,W,2)."""
    n, c, hh, ww = shape
    x = S.broadcast_to(S.reshape(x, shape=(n, c, hh, 1, ww, 1), name=f"{p}_r"), shape=(n, c, hh, 2, ww, 2),
                       name=f"{p}_b")
    return S.reshape(x, shape=(n, c, 2 * hh, 2 * ww), name=f"{p}_up")


def unet_level(nb: NetBuilder, h, shape):
    """One U-Net level: conv (GroupNorm) relu (the skip), 2x2 max (or avg) pool down, conv
    (GroupNorm) SiLU at the lower resolution, nearest 2x upsampling, concat with the skip,
    conv relu back to C."""
    p = nb.name("unet")
    n, c, hh, ww = shape
    if hh % 2 or ww % 2:
        return h, shape
    groups = nb.choice([0] + [g for g in (2, c // 2) if g > 1 and c % g == 0])

    def norm(x, q):  # diffusion U-Nets put GroupNorm after their convolutions
        return S.GroupNorm(x, num_groups=groups, name=q) if groups else x

    skip = S.Activation(norm(_conv(h, c, f"{p}_enc", kernel=3), f"{p}_enc_gn"), act_type="relu",
                        name=f"{p}_enc_relu")
    x = S.Pooling(skip, kernel=(2, 2), stride=(2, 2), pool_type=nb.choice(["max", "avg"]), name=f"{p}_down")
    x = S.silu(norm(_conv(x, 2 * c, f"{p}_mid", kernel=3), f"{p}_mid_gn"), name=f"{p}_mid_act")
    x = upsample_nearest(x, (n, 2 * c, hh // 2, ww // 2), f"{p}_up")
    x = S.Concat(x, skip, dim=1, name=f"{p}_skipcat")
    x = S.Activation(_conv(x, c, f"{p}_dec", kernel=3), act_type="relu", name=f"{p}_dec_relu")
    return x, shape


IMAGE_BLOCKS = {"inverted_residual": inverted_residual, "regnet_y": regnet_y, "convnext": convnext,
                "swin": swin_window_attention, "unet": unet_level}


# ---------------------------------------------------------------- sequence blocks (N, T, C)

def _rotary_tables(t, d):
    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    ang = np.outer(np.arange(t), inv)
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang).reshape(1, 1, t, d), np.sin(ang).reshape(1, 1, t, d)


def _rotate(x, cos, sin, d, p):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) (LLaMA's rotary)."""
    x1 = S.slice_axis(x, axis=-1, begin=0, end=d // 2, name=f"{p}_x1")
    x2 = S.slice_axis(x, axis=-1, begin=d // 2, end=None, name=f"{p}_x2")
    half = S.Concat(S.negative(x2, name=f"{p}_neg"), x1, dim=3, name=f"{p}_half")
    return S.elemwise_add(S.broadcast_mul(x, cos, name=f"{p}_cos"), S.broadcast_mul(half, sin, name=f"{p}_sin"),
                          name=f"{p}_rot")


def _alibi_slopes(heads):
    return np.array([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)]).reshape(1, heads, 1, 1)


def transformer(nb: NetBuilder, h, shape):
    """Pre-norm Transformer block (LayerNorm or RMSNorm), multi-head attention with any of: a
    padding mask from the ``pad_mask`` input (B, T), a causal mask (additive bias or
    where()), rotary embeddings on q and k, ALiBi biases (slopes x relative distance) or
    T5's bucketed relative-position bias (an Embedding of the bucket table),
    grouped-query attention, attention dropout; MLP with GELU or SwiGLU; residuals. Weights
    are named after ``nb.share_as`` when set (ALBERT's shared layers)."""
    p = nb.name("tf")
    pp = nb.share_as or p
    n, t, c = shape
    heads = nb.choice([v for v in (1, 2, 3, 4) if c % v == 0 and (c // v) % 2 == 0])
    d = c // heads
    y = norm(nb, h, -1, 3, c, f"{p}_ln1", pp=f"{pp}_ln1")

    def heads_of(z, q):
        z = S.reshape(nb.fc(z, c, p, pp, q), shape=(n, t, heads, d), name=f"{p}_{q}_r")
        return swap_heads(nb, z, f"{p}_{q}_t")

    q = heads_of(y, "q")
    kv_heads = nb.choice([v for v in (1, heads) if heads % v == 0])
    if kv_heads == heads:
        k, v = heads_of(y, "k"), heads_of(y, "v")
    else:  # grouped-query attention (LLaMA 2, Mistral): one k/v head broadcast to every q head
        def kv_of(q):
            z = S.reshape(nb.fc(y, kv_heads * d, p, pp, q), shape=(n, t, kv_heads, d), name=f"{p}_{q}_r")
            z = S.transpose(z, axes=(0, 2, 1, 3), name=f"{p}_{q}_t")
            return S.broadcast_to(z, shape=(n, heads, t, d), name=f"{p}_{q}_rep")
        k, v = kv_of("k"), kv_of("v")
    if nb.choice([True, False]):
        cos_t, sin_t = _rotary_tables(t, d)
        cos, sin = nb.const(f"rope_cos{d}", cos_t), nb.const(f"rope_sin{d}", sin_t)
        q, k = _rotate(q, cos, sin, d, f"{p}_rq"), _rotate(k, cos, sin, d, f"{p}_rk")
    a = S.batch_dot(q, k, transpose_b=True, name=f"{p}_qk") * (1.0 / np.sqrt(d))
    position = nb.choice(["none", "alibi", "t5"])
    if position == "alibi":
        slopes = nb.const(f"alibi_slopes{heads}", _alibi_slopes(heads))
        dist = nb.const("alibi_dist", -np.abs(np.arange(t)[None, :] - np.arange(t)[:, None]).reshape(1, 1, t, t))
        a = S.broadcast_add(a, S.broadcast_mul(slopes, dist, name=f"{p}_alibi"), name=f"{p}_alibi_add")
    elif position == "t5":  # T5's learned bias per (bucketed) relative position, via Embedding
        buckets = nb.const("t5_buckets", _t5_buckets(t))
        bias = S.Embedding(buckets, weight=nb.param(f"{pp}_t5_table"), input_dim=T5_BUCKETS, output_dim=heads,
                           name=f"{p}_t5_bias")
        bias = S.expand_dims(S.transpose(bias, axes=(2, 0, 1), name=f"{p}_t5_t"), axis=0, name=f"{p}_t5_e")
        a = S.broadcast_add(a, bias, name=f"{p}_t5_add")
    causal = nb.choice(["none", "bias", "where"])
    if causal == "bias":
        a = S.broadcast_add(a, nb.const("causal_bias", np.triu(np.full((t, t), -1e9), 1).reshape(1, 1, t, t)),
                            name=f"{p}_causal")
    elif causal == "where":
        keep = nb.const("causal_keep", np.tril(np.ones((t, t))).reshape(1, 1, t, t))
        a = S.where(keep, a, S.zeros_like(a, name=f"{p}_zeros") - 1e9, name=f"{p}_causal")
    if nb.choice([True, False]):
        bias = (nb.const("pad_mask", _pad_mask(n, t)) - 1.0) * 1e9
        if nb.choice(["reshape", "expand"]) == "reshape":
            bias = S.reshape(bias, shape=(n, 1, 1, t), name=f"{p}_padbias")
        else:
            bias = S.expand_dims(S.expand_dims(bias, axis=1, name=f"{p}_pad_e1"), axis=1, name=f"{p}_padbias")
        a = S.broadcast_add(a, bias, name=f"{p}_padded")
    a = softmax(nb, a, f"{p}_softmax")
    if nb.choice([True, False]):  # attention dropout: its mask must not depend on the tiling
        a = S.Dropout(a, p=0.25, name=f"{p}_attn_drop")
    y = swap_heads(nb, S.batch_dot(a, v, name=f"{p}_av"), f"{p}_merge_t")
    y = nb.fc(S.reshape(y, shape=(n, t, c), name=f"{p}_merge"), c, p, pp, "o")
    x = S.elemwise_add(h, y, name=f"{p}_res1")
    y = norm(nb, x, -1, 3, c, f"{p}_ln2", pp=f"{pp}_ln2")
    if nb.choice(["gelu", "swiglu"]) == "gelu":
        y = gelu(nb, nb.fc(y, 2 * c, p, pp, "up"), f"{p}_gelu")
    else:
        gate = S.silu(nb.fc(y, 2 * c, p, pp, "gate"), name=f"{p}_silu")
        y = S.elemwise_mul(gate, nb.fc(y, 2 * c, p, pp, "up"), name=f"{p}_glu")
    y = nb.fc(y, c, p, pp, "down")
    return S.elemwise_add(x, y, name=f"{p}_res2"), shape


def albert(nb: NetBuilder, h, shape):
    """ALBERT's cross-layer sharing: one Transformer layer's weights applied twice (the same
    configuration drawn twice from one seed; each weight's gradient sums over both uses)."""
    seed, outer = int(nb.rng.integers(1 << 30)), nb.rng
    nb.blocks.append("albert")
    nb.share_as = f"shared{nb.count + 1}"
    for _ in range(2):
        nb.rng = np.random.default_rng(seed)
        h, shape = transformer(nb, h, shape)
    nb.rng, nb.share_as = outer, None
    return h, shape


T5_BUCKETS = 8


def _t5_buckets(t):
    """T5's bidirectional buckets in small: the sign of the offset, then |offset| exactly
    up to 2 and logarithmically beyond, T5_BUCKETS in all."""
    rel = np.arange(t)[None, :] - np.arange(t)[:, None]
    half = T5_BUCKETS // 2
    mag = np.abs(rel)
    big = 2 + np.floor(np.log(np.maximum(mag, 1) / 2) / np.log(t / 2) * (half - 2)).astype(int)
    return (rel > 0) * half + np.where(mag < 2, mag, np.minimum(big, half - 1))


def _pad_mask(n, t):
    """1 for real tokens, 0 for padding: sequence i keeps t - i % (t // 2) tokens."""
    lengths = [t - i % max(1, t // 2) for i in range(n)]
    return (np.arange(t)[None, :] < np.array(lengths)[:, None]).astype(np.float64)


def causal_conv1d(nb: NetBuilder, h, shape):
    """TCN's residual block: two causal dilated Conv1d (pad (k-1)*dilation both sides, keep
    the first T outputs: PyTorch's Chomp1d), relu, residual (1x1 conv when the width
    changes). Works in (N, C, T), returns (N, T, C)."""
    p = nb.name("tcn")
    n, t, c = shape
    k, dil = nb.choice([2, 3]), nb.choice([1, 2, 4])
    out_c = nb.choice([c, c + c // 2 - (c // 2) % 2])
    x0 = S.transpose(h, axes=(0, 2, 1), name=f"{p}_nct")
    x = x0
    for i, width in enumerate((out_c, out_c)):
        x = S.Convolution(x, kernel=(k,), dilate=(dil,), pad=((k - 1) * dil,), num_filter=width, name=f"{p}_conv{i}")
        x = S.slice_axis(x, axis=2, begin=0, end=t, name=f"{p}_chomp{i}")
        x = S.Activation(x, act_type="relu", name=f"{p}_relu{i}")
    short = x0 if out_c == c else S.Convolution(x0, kernel=(1,), num_filter=out_c, name=f"{p}_down")
    x = S.Activation(S.elemwise_add(x, short, name=f"{p}_add"), act_type="relu", name=f"{p}_out")
    return S.transpose(x, axes=(0, 2, 1), name=f"{p}_ntc"), (n, t, out_c)


VOCAB = 12  # divisible by 2, 3 and 4: the table's rows can be split

SEQUENCE_BLOCKS = {"transformer": transformer, "tcn": causal_conv1d, "albert": albert}


# ---------------------------------------------------------------- whole graphs

def random_image_net(rng: np.random.Generator, kinds):
    """stem conv -> the image blocks `kinds` names -> global pool -> FC -> softmax loss.
    Returns (symbol, shapes of its data inputs, constant values, block names)."""
    nb = NetBuilder(rng)
    n = nb.choice([2, 3, 4, 6])
    size = nb.choice([4, 6, 8, 12])
    c = nb.choice([4, 6, 8])
    h = S.Activation(_conv(S.Variable("data"), c, "stem", kernel=3), act_type="relu", name="stem_relu")
    shape = (n, c, size, size)
    aux = []
    for kind in kinds:
        h, shape = IMAGE_BLOCKS[kind](nb, h, shape)
        aux += auxiliary_loss(nb, h)
    h = S.Pooling(h, global_pool=True, pool_type="avg", kernel=(1, 1), name="head_pool")
    h = S.FullyConnected(S.Flatten(h, name="head_flat"), num_hidden=4, name="head_fc")
    sym = S.SoftmaxOutput(h, name="softmax")
    shapes = {"data": (n, 3, size, size), "softmax_label": (n,)}
    return _group(sym, aux), _with_consts(shapes, nb), nb.consts, nb.blocks


def random_sequence_net(rng: np.random.Generator, kinds):
    """Embedding (token ids) or a linear projection -> the sequence blocks `kinds` names ->
    final norm -> a head (mean over time + FC + softmax loss, per-token regression, or a
    language-model head tied to the embedding weight)."""
    nb = NetBuilder(rng)
    n, t = nb.choice([2, 3, 4]), nb.choice([4, 6, 8, 9])
    c = nb.choice([8, 12])
    shapes = {}
    if nb.choice(["embed", "linear"]) == "embed":
        embed = S.Variable("embed_weight")
        h = S.Embedding(S.Variable("data"), weight=embed, input_dim=VOCAB, output_dim=c, name="embed")
        shapes["data"] = (n, t)
        nb.blocks.append("embedding")
    else:
        h = S.FullyConnected(S.Variable("data"), num_hidden=c, flatten=False, name="in_proj")
        shapes["data"] = (n, t, 5)
    if nb.choice([True, False]):  # GPT-2/BERT's learned absolute positions: a Gather of a table
        pos = S.take(S.Variable("pos_table", shape=(VOCAB, c)), nb.const("positions", np.arange(t)), axis=0,
                     name="pos_embed")
        h = S.broadcast_add(h, S.expand_dims(pos, axis=0, name="pos_e"), name="pos_add")
    shape = (n, t, c)
    aux = []
    for kind in kinds:
        h, shape = SEQUENCE_BLOCKS[kind](nb, h, shape)
        aux += auxiliary_loss(nb, h)
    h = norm(nb, h, -1, 3, shape[2], "final_ln")
    tied = "embedding" in nb.blocks and shape[2] == c
    head = nb.choice(["classify", "regress", "lm"] if tied else ["classify", "regress"])
    if head == "lm":  # language-model head tied to the embedding (one weight, two uses)
        h = S.FullyConnected(h, weight=embed, num_hidden=VOCAB, no_bias=True, flatten=False,
                             name="lm_head")
        sym = S.SoftmaxOutput(h, preserve_shape=True, name="lm")
        shapes["lm_label"] = (n, t)
    elif head == "classify":
        h = S.FullyConnected(S.mean(h, axis=1, name="head_mean"), num_hidden=4, name="head_fc")
        sym = S.SoftmaxOutput(h, name="softmax")
        shapes["softmax_label"] = (n,)
    else:
        h = S.FullyConnected(h, num_hidden=3, flatten=False, name="head_fc")
        sym = S.LinearRegressionOutput(h, name="regress")
        shapes["regress_label"] = (n, t, 3)
    return _group(sym, aux), _with_consts(shapes, nb), nb.consts, nb.blocks


def auxiliary_loss(nb: NetBuilder, h):
    """Sometimes an auxiliary loss on a block's output (deep supervision, Inception's side
    head): MakeLoss of 0.1 x the mean square, as a list of zero or one loss."""
    if nb.rng.integers(4):
        return []
    q = f"aux{nb.count}"
    return [S.MakeLoss(S.mean(S.square(h, name=f"{q}_sq"), name=f"{q}_mean") * 0.1, name=q)]


def _group(sym, aux):
    """The main loss and the auxiliary ones as one multi-output symbol."""
    return S.Group([sym] + aux) if aux else sym


def _with_consts(shapes, nb):
    return {**shapes, **{k: v.shape for k, v in nb.consts.items()}}


def random_net(seed: int, blocks: int = 2, kinds=None):
    """An image or sequence graph drawn from `seed`, of `blocks` random blocks of one family
    or of the blocks `kinds` names: (symbol, input shapes, constants, block names)."""
    rng = np.random.default_rng(seed)
    if kinds is None:
        family = IMAGE_BLOCKS if rng.integers(2) == 0 else SEQUENCE_BLOCKS
        kinds = [sorted(family)[int(rng.integers(len(family)))] for _ in range(blocks)]
    if all(k in IMAGE_BLOCKS for k in kinds):
        return random_image_net(rng, kinds)
    if all(k in SEQUENCE_BLOCKS for k in kinds):
        return random_sequence_net(rng, kinds)
    raise ValueError(f"blocks {kinds} mix the image and sequence families")


def net_values(sym, shapes, consts, seed=0):
    """float64 weights and inputs (BatchNorm variances positive, labels and token ids in
    range, constants as built)."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    vals = {}
    embed = "embed_weight" in sym.list_arguments()
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        if name in consts:
            vals[name] = consts[name]
        elif name == "softmax_label":
            vals[name] = rng.integers(0, 4, size=shape).astype(np.float64)
        elif name == "lm_label":
            vals[name] = rng.integers(0, VOCAB, size=shape).astype(np.float64)
        elif name == "data" and embed:
            vals[name] = rng.integers(0, VOCAB, size=shape).astype(np.float32)
        elif name.endswith("moving_var"):
            vals[name] = rng.uniform(0.5, 1.5, shape)
        elif name.endswith("_scale"):
            vals[name] = rng.uniform(0.5, 1.5, shape)
        else:
            vals[name] = rng.standard_normal(shape) * 0.5
    return vals
