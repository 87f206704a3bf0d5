"""Given code (do not edit): the models and functions the grader hands your code.

The grader keeps its own copy; editing this one changes nothing but your own experiments.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class CaptureNet(nn.Module):
    """Part 1's model: submodules, a method call, a size read and a dtype change."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)
        self.scale = nn.Parameter(torch.ones(d_out))

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        n = h.size(-1)                      # an int node: shape propagation records it as such
        h = self.fc2(h) * self.scale / n
        return h.to(torch.float64).relu(), h.sum(dim=-1)


class OnnxNet(nn.Module):
    """Part 4's model: Dropout and BatchNorm make train mode and eval mode differ."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.bn = nn.BatchNorm1d(d_hidden)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.bn(self.fc1(x)))))


# ---- Part 5: functions to compile. Read them the way Dynamo does.

def branchy(x, w, threshold: float):
    h = torch.relu(x @ w)
    if h.mean() > threshold:        # a Python `if` on a tensor's value: Dynamo cannot trace through it
        h = h * 2.0
    else:
        h = h - 1.0
    return torch.sin(h).sum(dim=-1)


def chatty(x):
    y = x.cos() + 1.0
    print("chatty: halfway")        # a side effect Dynamo will not put in a graph
    return torch.tanh(y) * x


def straight(x, w):
    return F.gelu(x @ w + 1.0).softmax(dim=-1)


FUNCTIONS = {"branchy": branchy, "chatty": chatty, "straight": straight}
