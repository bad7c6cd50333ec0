"""Small ``nn.Module``s the PyTorch parallelizer is tested and benchmarked on
(tests/planner/test_torch_parallelize.py, ``autotile bench engines-torch``)."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    """The README's MLP without its loss head: 784 -> 512 -> relu -> 10."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(512, 10)

    def forward(self, data):
        return self.fc2(self.relu1(self.fc1(data)))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads

        def split(t):
            return t.reshape(b, s, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        w = torch.softmax(q @ k.transpose(2, 3) / (d // h) ** 0.5, dim=-1)
        return self.o((w @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    """A pre-norm Transformer layer: attention and a relu FFN, each with a residual."""

    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff2(torch.relu(self.ff1(self.ln2(x))))


class CNN(nn.Module):
    """Two convolutions and a classifier on 8x8 images."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, data):
        x = torch.relu(self.conv2(torch.relu(self.conv1(data))))
        return self.fc(x.flatten(1))


def cases():
    """{name: (module factory, example input shape)}."""
    return {"mlp": (MLP, (64, 784)), "transformer": (Block, (16, 16, 32)), "cnn": (CNN, (16, 1, 8, 8))}
