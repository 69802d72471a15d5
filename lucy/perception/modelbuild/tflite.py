"""A TFLite flatbuffer converted to an ONNX graph, with the ``onnx`` package, numpy and the ``tflite`` package.

Why not tf2onnx: it needs TensorFlow, which set-up must never install. The flatbuffer is read with ``tflite``
(Apache-2.0, pure Python: the classes that flatc generates from TFLite's own schema, versioned with TensorFlow), and
each TFLite op becomes the ONNX nodes that compute the same thing, one function per op:

- TFLite is NHWC with OHWI filters (depthwise: 1HW(C*m)); ONNX's Conv is NCHW with OIHW filters: each conv is
  wrapped in a Transpose pair (pairs between two convs cancel, :func:`~.graph.cancel_transposes`) and its filter
  transposed once, here;
- a fused activation (RELU, RELU6, ...) becomes a node after the op; SAME padding is ONNX's ``SAME_UPPER``;
- DEQUANTIZE of a float16 weight keeps the weight float16 and adds a Cast to float32: the same values, as the TFLite
  interpreter computes them, in half the bytes (onnxruntime folds the Casts when it opens the model);
- a custom op (TFLite_Detection_PostProcess...) or any op not in :data:`OPS` is refused with
  :class:`~lucy.errors.ModelBuildError` naming it.

Tensors are named by their index (``t12``) except the graph's inputs and outputs, which keep their TFLite names; the
output is byte-for-byte the same on every run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import tflite
from onnx import TensorProto, helper

from lucy.errors import ModelBuildError
from lucy.perception.modelbuild.graph import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, cancel_transposes, finish

_NUMPY = {tflite.TensorType.FLOAT32: np.float32, tflite.TensorType.FLOAT16: np.float16,
          tflite.TensorType.INT32: np.int32, tflite.TensorType.INT64: np.int64, tflite.TensorType.UINT8: np.uint8,
          tflite.TensorType.INT8: np.int8}
_OPERATORS = {code: name for name, code in vars(tflite.BuiltinOperator).items() if not name.startswith("_")}


class Op:
    """One TFLite operator: its tensors' names and its builtin options, read from the flatbuffer."""

    def __init__(self, name: str, inputs: list[str], outputs: list[str], options: Any) -> None:
        self.name, self.inputs, self.outputs, self.options = name, inputs, outputs, options


def _options(op: Any, kind: type | None) -> Any:
    if kind is None:
        return None
    table = op.BuiltinOptions()
    if table is None:
        return None
    options = kind()
    options.Init(table.Bytes, table.Pos)
    return options


def _linear(code: int, out: str) -> str:
    """What the op before a fused activation ``code`` writes: ``out`` itself when there is no activation."""
    return out if code == tflite.ActivationFunctionType.NONE else f"{out}/linear"


def _activation(b: Builder, x: str, code: int, out: str) -> None:
    """A TFLite fused activation as a node after ``x`` that writes ``out`` (none when ``x`` is ``out``)."""
    fn = tflite.ActivationFunctionType
    if code == fn.NONE:
        return
    if code == fn.RELU:
        return b.node("Relu", [x], out)
    bounds = {fn.RELU6: (0.0, 6.0), fn.RELU_N1_TO_1: (-1.0, 1.0)}.get(code)
    if bounds is None:
        raise ModelBuildError(f"fused activation {code} is not supported")
    low = b.const(out, np.array(bounds[0], np.float32))
    high = b.const(out, np.array(bounds[1], np.float32))
    b.node("Clip", [x, low, high], out)


def _conv_attrs(options: Any) -> dict[str, Any]:
    pads = {} if options.Padding() == tflite.Padding.VALID else {"auto_pad": "SAME_UPPER"}
    return {"strides": [options.StrideH(), options.StrideW()],
            "dilations": [options.DilationHFactor(), options.DilationWFactor()], **pads}


def op_dequantize(b: Builder, op: Op) -> None:
    weight = b.value(op.inputs[0], "DEQUANTIZE's input")
    if weight.dtype != np.float16:
        raise ModelBuildError(f"DEQUANTIZE of {weight.dtype} (scale and zero point) is not supported")
    # Folded: the float32 value, as the interpreter computes it; a conv transposes it and stores it as float16
    # again when that is exact (:func:`_weight`).
    b.constants[op.outputs[0]] = weight.astype(np.float32)


def _conv(b: Builder, op: Op, weights: np.ndarray, group: int) -> None:
    out = op.outputs[0]
    x = b.transposed(b.tensor(op.inputs[0]), NHWC_TO_NCHW, f"{out}/nchw")
    inputs = [x, _weight(b, op.inputs[1], weights, out)]
    if len(op.inputs) > 2 and op.inputs[2]:
        inputs.append(_weight(b, op.inputs[2], b.value(op.inputs[2], "the bias"), out))
    linear = b.node("Conv", inputs, f"{out}/conv", kernel_shape=list(weights.shape[2:]), group=group,
                    **_conv_attrs(op.options))
    # The activation is applied in NCHW, before the Transpose back: a conv's Transpose then meets the next conv's.
    code = op.options.FusedActivationFunction()
    y = linear if code == tflite.ActivationFunctionType.NONE else f"{out}/act"
    _activation(b, linear, code, y)
    b.transposed(y, NCHW_TO_NHWC, out)


def _weight(b: Builder, name: str, value: np.ndarray, hint: str) -> str:
    """A conv's weight as an input: float16 again behind a Cast when it was a DEQUANTIZE of float16 weights."""
    half = value.astype(np.float16)
    if np.array_equal(half.astype(np.float32), value) and value.size >= 16:
        return b.node("Cast", [b.const(hint, half)], f"{hint}/{len(b.nodes)}/float", to=TensorProto.FLOAT)
    return b.const(hint, np.ascontiguousarray(value, np.float32))


def op_conv_2d(b: Builder, op: Op) -> None:
    weights = b.value(op.inputs[1], "CONV_2D's filter").transpose(0, 3, 1, 2)  # OHWI -> OIHW
    _conv(b, op, weights, group=1)


def op_depthwise_conv_2d(b: Builder, op: Op) -> None:
    weights = b.value(op.inputs[1], "DEPTHWISE_CONV_2D's filter")  # 1 x H x W x (C * multiplier)
    # ONNX's grouped conv with one group per input channel: O = C * m, I = 1, the output channel c * m + k.
    channels = weights.shape[3] // op.options.DepthMultiplier()
    _conv(b, op, weights.transpose(3, 0, 1, 2), group=channels)


def op_add(b: Builder, op: Op) -> None:
    code = op.options.FusedActivationFunction() if op.options else tflite.ActivationFunctionType.NONE
    y = b.node("Add", [b.tensor(op.inputs[0]), b.tensor(op.inputs[1])], _linear(code, op.outputs[0]))
    _activation(b, y, code, op.outputs[0])


def op_reshape(b: Builder, op: Op) -> None:
    if len(op.inputs) > 1 and op.inputs[1]:
        shape = b.value(op.inputs[1], "RESHAPE's shape")
    else:
        shape = op.options.NewShapeAsNumpy()
    shape = np.asarray(shape, np.int64).ravel()
    if (shape == 0).any():  # TFLite's 0 is an empty dimension, ONNX's (opset 13) copies the input's
        raise ModelBuildError(f"RESHAPE to {shape.tolist()}: a 0 in the shape is not supported")
    b.node("Reshape", [b.tensor(op.inputs[0]), b.const(op.outputs[0], shape)], op.outputs[0])


def op_concatenation(b: Builder, op: Op) -> None:
    code = op.options.FusedActivationFunction()
    y = b.node("Concat", [b.tensor(x) for x in op.inputs], _linear(code, op.outputs[0]), axis=op.options.Axis())
    _activation(b, y, code, op.outputs[0])


def op_logistic(b: Builder, op: Op) -> None:
    b.node("Sigmoid", [b.tensor(op.inputs[0])], op.outputs[0])


OPS: dict[str, tuple[Callable[[Builder, Op], None], type | None]] = {
    "DEQUANTIZE": (op_dequantize, None), "CONV_2D": (op_conv_2d, tflite.Conv2DOptions),
    "DEPTHWISE_CONV_2D": (op_depthwise_conv_2d, tflite.DepthwiseConv2DOptions),
    "ADD": (op_add, tflite.AddOptions), "RESHAPE": (op_reshape, tflite.ReshapeOptions),
    "CONCATENATION": (op_concatenation, tflite.ConcatenationOptions), "LOGISTIC": (op_logistic, None),
}


def _op_name(model: Any, op: Any) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    # Schema 3a: codes above 127 live in BuiltinCode, older files only have DeprecatedBuiltinCode.
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == tflite.BuiltinOperator.CUSTOM:
        return f"custom {code.CustomCode().decode()}"
    return _OPERATORS.get(builtin, f"builtin {builtin}")


def convert(data: bytes, *, name: str = "tflite") -> onnx.ModelProto:
    """The ONNX model (opset 13) of the first subgraph of the TFLite model ``data``. Inputs and outputs keep their
    TFLite names and shapes (NHWC for an image input, as the TFLite model has it)."""
    if data[4:8] != b"TFL3":  # the flatbuffer's file identifier, from TFLite's schema
        raise ModelBuildError(f"not a TFLite model (file identifier {bytes(data[4:8])!r}, expected b'TFL3')")
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        graph = model.Subgraphs(0)
    except Exception as err:  # flatbuffers raises plain errors on a damaged file
        raise ModelBuildError(f"not a readable TFLite model ({type(err).__name__}: {err})") from err
    if graph is None:
        raise ModelBuildError("the TFLite model has no subgraph")
    ops = [graph.Operators(i) for i in range(graph.OperatorsLength())]
    unknown = sorted({_op_name(model, op) for op in ops} - set(OPS))
    if unknown:
        raise ModelBuildError(f"the model uses ops this converter does not know: {', '.join(unknown)}")
    io = set(graph.InputsAsNumpy().tolist()) | set(graph.OutputsAsNumpy().tolist())

    def tensor_name(index: int) -> str:
        return "" if index < 0 else graph.Tensors(index).Name().decode() if index in io else f"t{index}"

    constants = {}
    for index in range(graph.TensorsLength()):
        tensor = graph.Tensors(index)
        buffer = model.Buffers(tensor.Buffer())
        if buffer is None or buffer.DataLength() == 0:
            continue
        dtype = _NUMPY.get(tensor.Type())
        if dtype is None:
            raise ModelBuildError(f"tensor {tensor.Name().decode()}: type {tensor.Type()} is not supported")
        raw = buffer.DataAsNumpy().tobytes()
        constants[tensor_name(index)] = np.frombuffer(raw, dtype).reshape(tensor.ShapeAsNumpy())
    b = Builder(constants)
    for op in ops:
        convert_op, options = OPS[_op_name(model, op)]
        convert_op(b, Op(_op_name(model, op), [tensor_name(i) for i in op.InputsAsNumpy()],
                         [tensor_name(i) for i in op.OutputsAsNumpy()], _options(op, options)))

    def info(index: int) -> onnx.ValueInfoProto:
        tensor = graph.Tensors(index)
        if tensor.Type() != tflite.TensorType.FLOAT32:
            raise ModelBuildError(f"input/output {tensor.Name().decode()} is not float32")
        return helper.make_tensor_value_info(tensor_name(index), TensorProto.FLOAT, tensor.ShapeAsNumpy().tolist())

    outputs = [info(i) for i in graph.OutputsAsNumpy()]
    b.nodes = cancel_transposes(b.nodes, {out.name for out in outputs})
    return finish(b, name, [info(i) for i in graph.InputsAsNumpy()], outputs)
