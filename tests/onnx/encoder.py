#!/usr/bin/python3
"""A small transformer encoder as torch.onnx.export writes one, built without PyTorch.

Issue 31's third point splits a 12-layer PyTorch encoder over runners smaller than its weights
(tests/onnx/transformer.py needs python3-torch). This script writes the same structure with
ONNX's own helpers (python3-onnx) so a ctest can split it: per layer, post-norm as PyTorch's
TransformerEncoderLayer (norm_first=False, GELU): q, k, v and the output projection as MatMul
and Add, heads by Reshape and Transpose, scores scaled and Softmax'd, the residual Add and
LayerNormalization, the feed-forward MatMul, GELU as 0.5 x (1 + Erf(x / sqrt 2)), MatMul,
residual and LayerNormalization. Each weight is drawn afresh (seeded), so every layer holds
its own. Writes DIR/model.onnx, DIR/x.npy (the input) and DIR/ref.npy (NumPy's output in f64).
  usage: tests/onnx/encoder.py DIR [LAYERS=2] [HIDDEN=64] [SEQ=16] [HEADS=4]"""
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out_dir = sys.argv[1]
layers, hidden, seq, heads = (int(a) for a in (sys.argv[2:6] + ["2", "64", "16", "4"][len(sys.argv[2:6]):]))
if hidden % heads:
    sys.exit(f"encoder.py: hidden {hidden} is not a multiple of heads {heads}")
head = hidden // heads
rng = np.random.default_rng(0)
nodes, inits, weights = [], [], {}


def const(name, value):
    inits.append(numpy_helper.from_array(value, name))
    weights[name] = value
    return name


def node(op, inputs, name, **attrs):
    nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
    return name


def linear(x, prefix, n_in, n_out):
    w = const(prefix + ".weight", (rng.standard_normal((n_in, n_out)) * 0.02).astype(np.float32))
    b = const(prefix + ".bias", (rng.standard_normal(n_out) * 0.1).astype(np.float32))
    return node("Add", [node("MatMul", [x, w], prefix + "_mm"), b], prefix + "_out")


def layer_norm(x, prefix):
    g = const(prefix + ".weight", (1.0 + rng.standard_normal(hidden) * 0.1).astype(np.float32))
    b = const(prefix + ".bias", (rng.standard_normal(hidden) * 0.1).astype(np.float32))
    return node("LayerNormalization", [x, g, b], prefix + "_out", axis=-1, epsilon=1e-5)


def attention(x, p):
    split = const(p + ".heads_shape", np.array([1, seq, heads, head], dtype=np.int64))
    merge = const(p + ".merge_shape", np.array([1, seq, hidden], dtype=np.int64))
    q, k, v = (node("Transpose", [node("Reshape", [linear(x, f"{p}.{n}", hidden, hidden), split], f"{p}.{n}_r")],
                    f"{p}.{n}_t", perm=perm) for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]),
                                                             ("v", [0, 2, 1, 3])))
    scale = const(p + ".scale", np.array(1.0 / math.sqrt(head), dtype=np.float32))
    s = node("Mul", [node("MatMul", [q, k], p + ".qk"), scale], p + ".scores")
    o = node("MatMul", [node("Softmax", [s], p + ".probs", axis=-1), v], p + ".ctx")
    o = node("Reshape", [node("Transpose", [o], p + ".ctx_t", perm=[0, 2, 1, 3]), merge], p + ".ctx_r")
    return linear(o, p + ".out_proj", hidden, hidden)


def gelu(x, p):
    r2 = const(p + ".sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one = const(p + ".one", np.array(1.0, dtype=np.float32))
    half = const(p + ".half", np.array(0.5, dtype=np.float32))
    e = node("Add", [node("Erf", [node("Div", [x, r2], p + ".d")], p + ".erf"), one], p + ".e1")
    return node("Mul", [node("Mul", [x, e], p + ".xe"), half], p + ".gelu")


x_name = "x"
h = x_name
for i in range(layers):
    p = f"layers.{i}"
    h = layer_norm(node("Add", [h, attention(h, p + ".self_attn")], p + ".res1"), p + ".norm1")
    f = linear(gelu(linear(h, p + ".linear1", hidden, 4 * hidden), p), p + ".linear2", 4 * hidden, hidden)
    h = layer_norm(node("Add", [h, f], p + ".res2"), p + ".norm2")
nodes.append(helper.make_node("Identity", [h], ["y"], name="output"))
graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="loom-encoder.py")
onnx.checker.check_model(model)
onnx.save(model, f"{out_dir}/model.onnx")


def ref_forward(x):
    """The same encoder in NumPy, f64."""
    W = {k: v.astype(np.float64) for k, v in weights.items()}
    erf = np.vectorize(math.erf)

    def lin(t, p):
        return t @ W[p + ".weight"] + W[p + ".bias"]

    def ln(t, p):
        mu = t.mean(-1, keepdims=True)
        var = ((t - mu) ** 2).mean(-1, keepdims=True)
        return (t - mu) / np.sqrt(var + 1e-5) * W[p + ".weight"] + W[p + ".bias"]

    for i in range(layers):
        p = f"layers.{i}.self_attn"
        q, k, v = (lin(x, f"{p}.{n}").reshape(1, seq, heads, head).transpose(0, 2, 1, 3) for n in "qkv")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
        s = np.exp(s - s.max(-1, keepdims=True))
        o = (s / s.sum(-1, keepdims=True)) @ v
        o = lin(o.transpose(0, 2, 1, 3).reshape(1, seq, hidden), p + ".out_proj")
        x = ln(x + o, f"layers.{i}.norm1")
        f = lin(x, f"layers.{i}.linear1")
        f = lin(0.5 * f * (1 + erf(f / math.sqrt(2))), f"layers.{i}.linear2")
        x = ln(x + f, f"layers.{i}.norm2")
    return x


x = rng.standard_normal((1, seq, hidden)).astype(np.float32)
np.save(f"{out_dir}/x.npy", x)
np.save(f"{out_dir}/ref.npy", ref_forward(x.astype(np.float64)).astype(np.float32))
print(f"encoder: {layers} layers, hidden {hidden}, sequence {seq}: "
      f"{sum(v.nbytes for v in weights.values())} bytes of initializers")
