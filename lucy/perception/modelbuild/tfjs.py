"""A TF.js graph model (model.json + weight shards) converted to an ONNX graph, with the ``onnx`` package and numpy.

Why not tf2onnx: it needs TensorFlow, which set-up must never install. TF.js graph models are TensorFlow GraphDefs
in JSON with their constants moved to binary shards, so a converter is one function per TF op, each writing the
ONNX nodes that compute the same thing:

- TF's image ops (Conv2D, MaxPool, ResizeBilinear) are NHWC and ONNX's are NCHW: each is wrapped in a Transpose
  pair, and the filters are transposed from HWIO to OIHW once, here. Back-to-back Transposes that cancel (the graph
  itself often goes NCHW -> NHWC -> op -> NCHW) are removed afterwards, so the model keeps one layout inside; a
  conv's bias, a separate Add in TF, becomes the ONNX Conv's bias so that nothing stands between two Transposes;
- SAME padding is ONNX's ``SAME_UPPER`` (TF puts the odd pixel at the bottom/right); explicit pads are kept;
- ResizeBilinear's ``half_pixel_centers`` / ``align_corners`` map to ONNX's coordinate transformation modes;
- weights are read as TF.js stores them (int64 as int32, float32 possibly quantised to float16 or to 8/16-bit
  affine) and expanded to float32 as TF.js itself does;
- nodes whose inputs are all constants (TF.js graphs keep some, e.g. a SparseToDense of no values) are evaluated
  here when the op has a numpy form, so no shape arithmetic is left for run time.

An op not in :data:`OPS` is refused with :class:`~lucy.errors.ModelBuildError` naming it: a silent wrong graph would
be worse than none. Everything is deterministic (node order, names, initializer order), so the output is
byte-for-byte the same on every run.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from lucy.errors import ModelBuildError
from lucy.perception.modelbuild.graph import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, cancel_transposes, finish

_QUANTISED = {"float16": np.float16, "uint8": np.uint8, "uint16": np.uint16}
_STORED = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}


def read_weights(manifest: list[dict[str, Any]], read: Callable[[str], bytes]) -> dict[str, np.ndarray]:
    """Every weight of a TF.js ``weightsManifest``, by name; ``read(path)`` gives a shard's bytes. A group's
    weights lie back to back in the concatenation of its shards, in manifest order."""
    weights: dict[str, np.ndarray] = {}
    for group in manifest:
        data = b"".join(read(path) for path in group["paths"])
        offset = 0
        for spec in group["weights"]:
            shape = [int(d) for d in spec["shape"]]
            count = int(np.prod(shape, dtype=np.int64))
            quantisation = spec.get("quantization")
            if quantisation:
                stored = _QUANTISED.get(quantisation["dtype"])
                if stored is None:
                    raise ModelBuildError(f"weight {spec['name']}: unknown quantisation {quantisation['dtype']!r}")
            else:
                stored = _STORED.get(spec["dtype"])
                if stored is None:
                    raise ModelBuildError(f"weight {spec['name']}: unknown dtype {spec['dtype']!r}")
            size = count * np.dtype(stored).itemsize
            if offset + size > len(data):
                raise ModelBuildError(f"weight {spec['name']} runs past the end of its shards ({len(data)} bytes)")
            value = np.frombuffer(data, stored, count, offset).reshape(shape)
            offset += size
            if quantisation and quantisation["dtype"] == "float16":
                value = value.astype(np.float32)
            elif quantisation:  # affine: q * scale + min, as tf.io.decodeWeights does
                value = (value.astype(np.float32) * np.float32(quantisation["scale"])
                         + np.float32(quantisation["min"]))
            weights[spec["name"]] = value
    return weights


def _ref(name: str) -> str:
    """A TF input reference (``node``, ``node:1``; ``^node`` is a control edge) as a tensor name (``node:0``)."""
    return name if ":" in name else f"{name}:0"


def _attr(node: dict[str, Any], key: str, default: Any = None) -> Any:
    """One attribute of a TF node in TF.js's JSON form, as a plain value (strings are base64 there)."""
    attr = node.get("attr", {}).get(key)
    if attr is None:
        return default
    if "s" in attr:
        return base64.b64decode(attr["s"]).decode()
    if "list" in attr:
        return [int(i) for i in attr["list"].get("i", [])]
    if "b" in attr:
        return bool(attr["b"])
    if "f" in attr:
        return float(attr["f"])
    if "i" in attr:
        return int(attr["i"])
    return default


def _nhwc_pair(values: list[int], what: str, node: dict[str, Any]) -> list[int]:
    """The H and W entries of an NHWC strides / ksize / dilations list (N and C must be 1)."""
    if not values:
        return [1, 1]
    if len(values) != 4 or values[0] != 1 or values[3] != 1:
        raise ModelBuildError(f"{node['op']} {node['name']}: {what} {values} over batch or channels")
    return values[1:3]


def _padding(node: dict[str, Any]) -> dict[str, Any]:
    padding = _attr(node, "padding")
    if _attr(node, "data_format", "NHWC") != "NHWC":
        raise ModelBuildError(f"{node['op']} {node['name']}: only NHWC is supported")
    if padding == "SAME":
        return {"auto_pad": "SAME_UPPER"}  # TF pads the odd pixel at the end, as SAME_UPPER does
    if padding == "VALID":
        return {}
    if padding == "EXPLICIT":
        pads = _attr(node, "explicit_paddings")  # [before, after] per NHWC dimension
        return {"pads": [pads[2], pads[4], pads[3], pads[5]]}
    raise ModelBuildError(f"{node['op']} {node['name']}: unknown padding {padding!r}")


def op_placeholder(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    pass  # a graph input, declared by :func:`convert`


def op_identity(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    b.node("Identity", [b.tensor(inputs[0])], out)


def op_add(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    conv, bias = inputs if inputs[1] in b.constants else inputs[::-1]
    if conv in b.convs and b.readers.get(conv) == 1 and bias in b.constants and b.constants[bias].ndim == 1:
        # A conv's bias (TF adds it after the conv): it becomes the ONNX Conv's third input, and the conv's
        # Transpose back to NHWC writes this Add's output, so that Transpose can meet the next conv's.
        node_conv, transpose = b.convs[conv]
        if len(node_conv.input) == 2 and len(b.constants[bias]) == len(b.constants[node_conv.input[1]]):
            node_conv.input.append(b.tensor(bias))
            transpose.output[0] = out
            return
    b.node("Add", [b.tensor(inputs[0]), b.tensor(inputs[1])], out)


def op_sigmoid(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    b.node("Sigmoid", [b.tensor(inputs[0])], out)


def op_leaky_relu(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    b.node("LeakyRelu", [b.tensor(inputs[0])], out, alpha=_attr(node, "alpha", 0.2))


def op_transpose(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    perm = b.value(inputs[1], "Transpose's perm")
    b.transposed(b.tensor(inputs[0]), tuple(int(p) for p in perm), out)


def op_reshape(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    shape = b.value(inputs[1], "Reshape's shape").astype(np.int64).ravel()
    if (shape == 0).any():  # TF's 0 is an empty dimension, ONNX's (opset 13) copies the input's
        raise ModelBuildError(f"Reshape {node['name']}: a 0 in the shape {shape.tolist()} is not supported")
    b.node("Reshape", [b.tensor(inputs[0]), b.const(out, shape)], out)


def op_concat(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    axis = int(b.value(inputs[-1], "ConcatV2's axis"))
    b.node("Concat", [b.tensor(x) for x in inputs[:-1]], out, axis=axis)


def op_pad(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    pads = b.value(inputs[1], "Pad's paddings").astype(np.int64)  # [[before, after], ...]
    args = [b.tensor(inputs[0]), b.const(out, np.concatenate([pads[:, 0], pads[:, 1]]))]
    if len(inputs) > 2:  # PadV2's constant value (MaxPool's padding is -inf)
        args.append(b.const(out, np.asarray(b.value(inputs[2], "PadV2's constant"), np.float32).reshape(())))
    b.node("Pad", args, out, mode="constant")


def op_split_v(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    sizes = b.value(inputs[1], "SplitV's sizes").astype(np.int64).ravel()
    axis = int(b.value(inputs[2], "SplitV's axis"))
    if (sizes < 0).any():  # -1 ("the rest") would need the input's shape
        raise ModelBuildError(f"SplitV {node['name']}: sizes {sizes.tolist()} with -1 are not supported")
    outputs = [out] + [f"{node['name']}:{k}" for k in range(1, len(sizes))]
    b.nodes.append(helper.make_node("Split", [b.tensor(inputs[0]), b.const(out, sizes)], outputs, name=out,
                                    axis=axis))


def op_conv2d(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    # HWIO -> OIHW, here, so the model holds the layout ONNX reads; the data goes NHWC -> NCHW -> NHWC.
    weights = b.value(inputs[1], "Conv2D's filter").transpose(3, 2, 0, 1)
    x = b.transposed(b.tensor(inputs[0]), NHWC_TO_NCHW, f"{out}/nchw")
    y = b.node("Conv", [x, b.const(out, np.ascontiguousarray(weights))], f"{out}/conv",
               kernel_shape=list(weights.shape[2:]), strides=_nhwc_pair(_attr(node, "strides"), "strides", node),
               dilations=_nhwc_pair(_attr(node, "dilations"), "dilations", node), **_padding(node))
    b.transposed(y, NCHW_TO_NHWC, out)
    b.convs[out] = (b.nodes[-2], b.nodes[-1])


def op_max_pool(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    x = b.transposed(b.tensor(inputs[0]), NHWC_TO_NCHW, f"{out}/nchw")
    y = b.node("MaxPool", [x], f"{out}/pool", kernel_shape=_nhwc_pair(_attr(node, "ksize"), "ksize", node),
               strides=_nhwc_pair(_attr(node, "strides"), "strides", node), **_padding(node))
    b.transposed(y, NCHW_TO_NHWC, out)


def op_resize_bilinear(b: Builder, node: dict[str, Any], inputs: list[str], out: str) -> None:
    size = b.value(inputs[1], "ResizeBilinear's size").astype(np.int64).ravel()
    if _attr(node, "align_corners", False):
        mode = "align_corners"
    elif _attr(node, "half_pixel_centers", False):
        mode = "half_pixel"  # TF's half-pixel bilinear clamps at the edges as onnxruntime's does
    else:
        mode = "asymmetric"  # TF's legacy mapping: x_in = x_out * in / out
    x = b.transposed(b.tensor(inputs[0]), NHWC_TO_NCHW, f"{out}/nchw")
    # Opset 13's Resize wants the sizes of every dimension: N and C are the input's, taken at run time.
    shape = b.node("Shape", [x], f"{out}/shape")
    batch_channels = b.node("Slice", [shape, b.const(out, np.array([0], np.int64)),
                                      b.const(out, np.array([2], np.int64))], f"{out}/nc")
    sizes = b.node("Concat", [batch_channels, b.const(out, size)], f"{out}/sizes", axis=0)
    y = b.node("Resize", [x, "", "", sizes], f"{out}/resize", mode="linear", coordinate_transformation_mode=mode)
    b.transposed(y, NCHW_TO_NHWC, out)


def fold_sparse_to_dense(indices: np.ndarray, shape: np.ndarray, values: np.ndarray,
                         default: np.ndarray) -> np.ndarray:
    dense = np.full(shape.astype(np.int64).ravel(), default, dtype=np.result_type(values, default))
    index = indices.astype(np.int64)
    index = index.reshape(-1, 1) if index.ndim < 2 else index  # [N] or a scalar: indices into a vector
    if len(index):
        dense[tuple(index.T)] = values
    return dense


OPS: dict[str, Callable[[Builder, dict[str, Any], list[str], str], None]] = {
    "Placeholder": op_placeholder, "Identity": op_identity, "Add": op_add, "AddV2": op_add, "Sigmoid": op_sigmoid,
    "LeakyRelu": op_leaky_relu, "Transpose": op_transpose, "Reshape": op_reshape, "ConcatV2": op_concat,
    "Pad": op_pad, "PadV2": op_pad, "SplitV": op_split_v, "Conv2D": op_conv2d, "MaxPool": op_max_pool,
    "ResizeBilinear": op_resize_bilinear,
}
# Ops evaluated here when every input is a constant (TF.js graphs keep such shape arithmetic).
FOLD: dict[str, Callable[..., np.ndarray]] = {
    "Add": np.add, "AddV2": np.add, "Identity": lambda x: x, "SparseToDense": fold_sparse_to_dense,
}


def _ordered(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes in a topological order (ONNX requires one; model.json need not be), stable: the file's order
    wherever it allows."""
    names = {node["name"] for node in nodes}
    done: set[str] = set()
    order: list[dict[str, Any]] = []
    pending = list(nodes)
    while pending:
        rest = []
        for node in pending:
            needs = {x.lstrip("^").split(":")[0] for x in node.get("input", [])} & names
            if needs <= done:
                order.append(node)
                done.add(node["name"])
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ModelBuildError(f"the graph has a cycle through {sorted(n['name'] for n in rest)[:5]}")
        pending = rest
    return order


def _dims(shaped: Mapping[str, Any]) -> list[int | None]:
    """The dimensions of a TF TensorShape in JSON (``{"shape": {"dim": [{"size": "1"}, ...]}}`` or a signature
    entry's ``tensorShape``); unknown ones (-1) as None."""
    shape = shaped.get("shape") or shaped.get("tensorShape") or {}
    return [int(d["size"]) if int(d.get("size", -1)) >= 0 else None for d in shape.get("dim", [])]


def convert(spec: Mapping[str, Any], weights: Mapping[str, np.ndarray], *, name: str = "tfjs") -> onnx.ModelProto:
    """The ONNX model (opset 13) of the TF.js graph model ``spec`` (model.json, parsed) with ``weights``
    (:func:`read_weights`). Inputs and outputs keep the names of the model's signature (``input_1:0``, ...)."""
    topology = spec["modelTopology"]["node"]
    b = Builder({_ref(node["name"]): weights[node["name"]] for node in topology
                 if node["op"] == "Const" and node["name"] in weights})
    missing = [node["name"] for node in topology if node["op"] == "Const" and _ref(node["name"]) not in b.constants]
    if missing:
        raise ModelBuildError(f"constants without weights: {missing[:5]}")
    unknown = sorted({node["op"] for node in topology} - set(OPS) - set(FOLD) - {"Const"})
    if unknown:
        raise ModelBuildError(f"the graph uses ops this converter does not know: {', '.join(unknown)}")
    for node in topology:
        for x in node.get("input", []):
            b.readers[_ref(x)] = b.readers.get(_ref(x), 0) + 1
    graph_inputs = []
    for node in _ordered([node for node in topology if node["op"] != "Const"]):
        inputs = [_ref(x) for x in node.get("input", []) if not x.startswith("^")]
        out = _ref(node["name"])
        if node["op"] in FOLD and inputs and all(x in b.constants for x in inputs):
            b.constants[out] = np.asarray(FOLD[node["op"]](*(b.constants[x] for x in inputs)))
            continue
        if node["op"] not in OPS:
            raise ModelBuildError(f"{node['op']} {node['name']}: only supported with constant inputs")
        if node["op"] == "Placeholder":
            graph_inputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, _dims(node["attr"]["shape"])))
        OPS[node["op"]](b, node, inputs, out)
    signature = spec.get("signature", {}).get("outputs") or {b.nodes[-1].output[0]: {}}
    outputs = list(signature)
    b.nodes = cancel_transposes(b.nodes, set(outputs))
    return finish(b, name, graph_inputs,
                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, _dims(signature[out])) for out in outputs])
