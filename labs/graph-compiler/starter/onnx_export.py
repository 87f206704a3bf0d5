"""Part 4: export to ONNX and run the file with onnxruntime."""

from __future__ import annotations

import numpy as np
import torch

OPSET = 18


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path: str) -> str:
    """Write `model` (inference behaviour: eval mode) to `path` as ONNX opset 18, with one input named "x"
    and one output named "y", dim 0 of both a symbolic dimension named "batch". Returns path."""
    raise NotImplementedError("export_onnx: see README.md, section \"Part 4: ONNX export and onnxruntime\"")


def run_onnx(path: str, x: torch.Tensor) -> np.ndarray:
    """Run the ONNX file with onnxruntime on the CPU: feed x (any float dtype) as float32 under the input's
    name, return the first output (a float32 numpy array)."""
    raise NotImplementedError("run_onnx: see README.md, section \"Part 4: ONNX export and onnxruntime\"")
