"""The OCR engine is chosen in config; each reads generated text; an engine that cannot load says why."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from lucy.config import Level, load_settings
from lucy.config.settings import PixelsCaptionerSettings
from lucy.errors import LucyError
from lucy.ingest.frames import Clip
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.perception import ocr
from lucy.synth import PALETTE, Overlay, Scene
from lucy.synth.video import FramePainter


def sign_clip() -> Clip:
    painter = FramePainter(640, 360, [Scene(0, 4, PALETTE["teal"])],
                           [Overlay(0, 4, "NORTH GATE 12", size=0.09, box=None)], [], texture=True)
    times = np.arange(0, 4, 1.0)
    return Clip(np.stack([painter(float(t)) for t in times]), times)


@pytest.mark.parametrize("engine", ["tesseract", "rapidocr"])
def test_each_engine_is_selectable_and_reads_the_sign(engine):
    captioner = PixelsCaptioner(PixelsCaptionerSettings(ocr_engine=engine, people=False))
    assert f"({engine} " in captioner.model
    text = asyncio.run(captioner.describe(sign_clip(), "What does the sign say?", level=Level.FINE)).text
    assert '"NORTH GATE 12"' in text


def test_default_engine_is_rapidocr_and_config_refuses_unknown_ones(tmp_path):
    assert PixelsCaptionerSettings().ocr_engine == "rapidocr"
    with pytest.raises(ValidationError):
        PixelsCaptionerSettings(ocr_engine="easyocr")
    (tmp_path / "lucy.toml").write_text('[captioner.pixels]\nocr_engine = "tesseract"\n')
    assert load_settings(tmp_path / "lucy.toml").captioner.pixels.ocr_engine == "tesseract"
    with pytest.raises(LucyError, match="unknown OCR engine"):
        ocr.open_ocr("easyocr")


def test_rapidocr_without_its_bundled_models_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(ocr, "_RAPID_MODELS", ("PP-OCRv6_det_small.onnx", "missing_rec.onnx", "x_cls.onnx"))
    with pytest.raises(LucyError, match=r"bundled models missing_rec\.onnx, x_cls\.onnx .*never downloads"):
        PixelsCaptioner(PixelsCaptionerSettings(ocr_engine="rapidocr"))


def test_rapidocr_models_come_from_the_installed_package():
    paths = ocr.rapidocr_models()
    assert all(p.is_file() and p.parent.name == "models" and p.parent.parent.name == "rapidocr" for p in paths)


def test_low_confidence_lines_are_dropped():
    engine = ocr.open_ocr("rapidocr")
    noise = np.random.default_rng(0).integers(0, 255, (120, 400), dtype=np.uint8)
    lines = engine.read(Image.fromarray(noise))
    assert all(line.confidence < engine.min_confidence for line in lines)  # whatever noise yields is filtered
    captioner = PixelsCaptioner(PixelsCaptionerSettings(ocr_engine="rapidocr", ocr_min_confidence=100, people=False))
    text = asyncio.run(captioner.describe(sign_clip(), "Read the text.", level=Level.FINE)).text
    assert "- none readable" in text  # nothing reaches 100


def test_read_text_loses_format_characters_so_its_words_stay_findable(tmp_path):
    """A zero-width space or soft hyphen inside a word would make it another word to full-text search: the line
    OCR read is kept in NFC, without format characters, single-spaced."""
    from lucy.memory.nodes import MemoryNode
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    read = ocr.line_text("PLAT\u200bFORM\u00ad  7\u2060 De\u0301part \ufeff")
    assert read == "PLATFORM 7 D\u00e9part"
    store = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    try:
        store.add(MemoryNode("cam", "coarse", 0, 60, f"On-screen text: {read}"))
        assert [n.text for n, _ in store.search("cam", "platform")] == ["On-screen text: PLATFORM 7 Départ"]
    finally:
        store.close()


def test_rapidocr_sessions_reuse_their_own_arena_and_read_one_line_per_batch():
    """RapidOCR's sessions run with onnxruntime's CPU arena (RapidOCR turns it off: every tensor then went through
    malloc, and glibc kept each executor thread's high-water mark, so a server's RSS crept up), without memory
    patterns, and its recogniser reads one line per run (a batch of six long lines padded to the widest peaked at
    ~280 MiB). Several long lines in one picture are all still read."""
    engine = ocr.RapidOcrEngine(1)
    signs = ["PLATFORM EXIT GATE TICKETS DEPARTURES", "NORTH SOUTH LIFT STAIRS CAFE", "CITY TRAIN 7B 14:05"]
    painter = FramePainter(640, 360, [Scene(0, 4, PALETTE["blue"])],
                           [Overlay(0, 4, text, x=0.04, y=0.1 + 0.25 * k, size=0.06) for k, text in enumerate(signs)],
                           [])
    read = [line.text for line in engine.read(Image.fromarray(painter(1.0)))]
    assert all(sign in read for sign in signs), read
    rapid = engine._idle.get_nowait()
    assert rapid.text_rec.rec_batch_num == 1
    for model in (rapid.text_det, rapid.text_rec):
        options = model.session.session.get_session_options()
        assert options.enable_cpu_mem_arena and not options.enable_mem_pattern


def test_a_picture_read_recently_is_read_again_only_when_it_changed():
    engine = ocr.SteadyReads(ocr.open_ocr("rapidocr"))
    rng = np.random.default_rng(1)

    def sign(text: str, *, noise: int = 0) -> Image.Image:
        frame = FramePainter(640, 360, [Scene(0, 1, PALETTE["teal"])], [Overlay(0, 1, text, size=0.09, box=None)],
                             [], texture=True)(0.5).astype(np.int16)
        frame += rng.integers(-noise, noise + 1, frame.shape, dtype=np.int16)  # decoded again: compression noise
        return Image.fromarray(np.clip(frame, 0, 255).astype(np.uint8))

    def texts(picture: Image.Image) -> list[str]:
        return [line.text for line in engine.read(picture)]

    assert texts(sign("NORTH GATE 12")) == ["NORTH GATE 12"]
    assert texts(sign("NORTH GATE 12", noise=2)) == ["NORTH GATE 12"]
    assert (engine.reads, engine.reused) == (1, 1)
    assert texts(sign("NORTH GATE 13")) == ["NORTH GATE 13"]  # one character changed: read
    assert texts(sign("NORTH GATE 12").crop((0, 0, 640, 300))) == ["NORTH GATE 12"]  # another size: read
    assert (engine.reads, engine.reused) == (3, 1)

    engine = ocr.SteadyReads(engine.engine, keep_bytes=640 * 360 * 3)  # room for one picture
    for text in ("NORTH GATE 12", "NORTH GATE 13", "NORTH GATE 12"):
        assert texts(sign(text)) == [text]
    assert (engine.reads, engine.reused) == (3, 0)
