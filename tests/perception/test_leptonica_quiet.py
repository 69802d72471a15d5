"""Leptonica (Tesseract's image library) prints "Error in boxClipToRectangle ..." on stderr for harmless cases;
opening the Tesseract engine silences it for the whole process, every thread included, and still reads text."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("tesserocr")

# In a child process (the setting is process-wide): provoke Leptonica's message from another thread, the way a
# server's OCR threads do, after opening (or not) the Tesseract engine; then read a sign with that engine.
SCRIPT = """
import ctypes, sys, threading
import numpy as np
from PIL import Image
import tesserocr
from lucy.perception import ocr
from lucy.synth import PALETTE, Overlay, Scene
from lucy.synth.video import FramePainter

engine = ocr.open_ocr("tesseract") if sys.argv[1] == "engine" else None
leptonica = ctypes.CDLL(ocr.leptonica_library())
leptonica.boxClipToRectangle.restype = ctypes.c_void_p
thread = threading.Thread(target=leptonica.boxClipToRectangle, args=(None, 10, 10))  # "box not defined"
thread.start()
thread.join()
if engine is not None:
    sign = Overlay(0, 1, "NORTH GATE 12", size=0.09, box=None)
    frame = FramePainter(640, 360, [Scene(0, 1, PALETTE["teal"])], [sign], [])(0.0)
    print(" | ".join(line.text for line in engine.read(Image.fromarray(frame).convert("L"))))
"""


def run(mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=False,
                          timeout=120, env={**os.environ, **env})


def test_leptonica_messages_are_silenced_once_tesseract_is_opened():
    loud = run("bare")
    assert loud.returncode == 0, loud.stderr
    assert "Error in boxClipToRectangle: box not defined" in loud.stderr  # the message exists without the fix
    quiet = run("engine")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and "NORTH GATE 12" in quiet.stdout


def test_lept_msg_severity_when_set_is_obeyed():
    shown = run("engine", LEPT_MSG_SEVERITY="3")  # L_SEVERITY_INFO: the user asked for Leptonica's messages
    assert "Error in boxClipToRectangle: box not defined" in shown.stderr
