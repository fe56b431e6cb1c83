#!/usr/bin/python3
"""Issue 31's transformer: a PyTorch encoder (random weights) exported with torch.onnx.export.

Writes DIR/model.onnx, DIR/x.npy (the input) and DIR/ref.npy (PyTorch's output for it), so that
`loom-run DIR/model.onnx --in x=DIR/x.npy --out-dir OUT` can be compared with the reference.
  usage: tests/onnx/transformer.py DIR [LAYERS=12] [HIDDEN=1024] [SEQ=128] [THREADS=2]
At the defaults the initializers hold about 600 MB (12 layers of 4 h^2 attention and 8 h^2
feed-forward weights, f32)."""
import sys

import numpy as np
import torch

out_dir = sys.argv[1]
layers, hidden, seq = (int(a) for a in (sys.argv[2:5] + ["12", "1024", "128"][len(sys.argv[2:5]):]))
torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else 2)
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(hidden, nhead=16 if hidden % 16 == 0 else 1, dim_feedforward=4 * hidden,
                                         dropout=0.0, activation="gelu", batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False).eval()
# The encoder copies one layer: its layers start equal, and the exporter would keep one copy of
# equal initializers. Each weight is drawn afresh so that every layer's are its own.
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randn_like(p) * (0.02 if p.dim() > 1 else 0.1) + (1.0 if p.dim() == 1 and p.shape[0] == hidden else 0.0))
x = torch.randn(1, seq, hidden)
with torch.no_grad():
    ref = model(x)
torch.onnx.export(model, (x,), f"{out_dir}/model.onnx", input_names=["x"], output_names=["y"], opset_version=17,
                  do_constant_folding=True)
np.save(f"{out_dir}/x.npy", x.numpy())
np.save(f"{out_dir}/ref.npy", ref.numpy())
print(f"transformer: {layers} layers, hidden {hidden}, sequence {seq}: "
      f"{sum(p.numel() for p in model.parameters()) * 4 / 1e6:.0f} MB of weights")
