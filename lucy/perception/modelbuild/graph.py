"""What the converters share: the ONNX graph being written (:class:`Builder`), the removal of Transpose pairs
that undo each other (:func:`cancel_transposes`: TF and TFLite are NHWC, ONNX's image ops NCHW, so each image op
is wrapped in a pair and the pairs between two image ops cancel) and the model's final, deterministic form
(:func:`finish`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from lucy.errors import ModelBuildError

OPSET = 13
IR_VERSION = 8  # fixed, not onnx's default for its own version, so that a newer onnx writes the same bytes
NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


class Builder:
    """The ONNX graph being written: nodes in order, initializers in order of first use, constants known here."""

    def __init__(self, constants: Mapping[str, np.ndarray]) -> None:
        self.constants = dict(constants)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._emitted: set[str] = set()
        self._count = 0
        self.readers: dict[str, int] = {}  # how many ops of the source graph read each tensor
        self.convs: dict[str, tuple[onnx.NodeProto, onnx.NodeProto]] = {}  # conv output -> (Conv, its Transpose)

    def value(self, name: str, what: str) -> np.ndarray:
        """The constant ``name`` (a perm, an axis, a filter...); refused if it is computed at run time."""
        if name not in self.constants:
            raise ModelBuildError(f"{what} must be a constant, {name!r} is computed at run time")
        return self.constants[name]

    def tensor(self, name: str) -> str:
        """``name`` as an input of an ONNX node: a constant becomes an initializer (once)."""
        if name in self.constants and name not in self._emitted:
            self._emitted.add(name)
            self.initializers.append(numpy_helper.from_array(np.asarray(self.constants[name]), name))
        return name

    def const(self, hint: str, value: np.ndarray) -> str:
        """A new constant input (int64 shapes, pads, transposed filters), named after the node it belongs to."""
        name = f"{hint}/const{self._count}"
        self._count += 1
        self.constants[name] = value
        return self.tensor(name)

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def transposed(self, x: str, perm: tuple[int, ...], output: str) -> str:
        return self.node("Transpose", [x], output, perm=list(perm))


def cancel_transposes(nodes: list[onnx.NodeProto], keep: set[str]) -> list[onnx.NodeProto]:
    """Drop Transpose pairs that undo each other (A -> perm p -> perm q -> B with q after p the identity): the
    readers of the second read A. The first stays if anything else reads it; graph outputs are never renamed."""
    producer = {out: node for node in nodes for out in node.output}
    rename: dict[str, str] = {}
    for node in nodes:
        node.input[:] = [rename.get(x, x) for x in node.input]
        if node.op_type != "Transpose" or node.output[0] in keep:
            continue
        first = producer.get(node.input[0])
        if first is None or first.op_type != "Transpose":
            continue
        p = list(helper.get_attribute_value(first.attribute[0]))
        q = list(helper.get_attribute_value(node.attribute[0]))
        if [p[i] for i in q] == list(range(len(p))):
            rename[node.output[0]] = first.input[0]
    for node in nodes:
        node.input[:] = [rename.get(x, x) for x in node.input]
    while True:  # unread nodes go (a cancelled pair's first Transpose, once nothing else reads it)
        used = {x for node in nodes for x in node.input} | keep
        alive = [node for node in nodes if any(out in used for out in node.output)]
        if len(alive) == len(nodes):
            return nodes
        nodes = alive


def finish(b: Builder, name: str, inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """The checked model of ``b``'s nodes (opset 13), with only the initializers that some node reads."""
    used = {x for node in b.nodes for x in node.input}
    initializers = [init for init in b.initializers if init.name in used]
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="lucy.perception.modelbuild")
    onnx.checker.check_model(model)
    return model
