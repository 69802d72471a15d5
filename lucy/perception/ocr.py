"""On-screen text: two OCR engines behind one small interface, chosen in config (``captioner.pixels.ocr_engine``).

- ``tesseract``: Tesseract 5 in-process through ``tesserocr`` (LSTM only), a pool of engines, one per thread.
- ``rapidocr``: PP-OCR (detection + recognition ONNX models) through RapidOCR 3 on onnxruntime. Its models ship
  inside the ``rapidocr`` wheel (Apache-2.0); they are loaded from the installed package by path, never downloaded.

Measured by ``bench/perception.py`` on 24 generated 720p frames with 1-3 signs each, and the same frames
"photographed" (perspective tilt, defocus, uneven light, noise, JPEG q40), read as the pixels captioner reads
them (RapidOCR once on the colour picture; Tesseract on luma plus the darkest channel), one CPU thread:

    engine      generated text    photographed text    CPU per 720p frame
    rapidocr    99.2 % chars      99.0 % chars         77-79 ms (detector at 640 px on the long side)
    tesseract   85.4 % chars      57.7 % chars         98-139 ms (two passes; 37-56 ms for one)

RapidOCR is the default: more accurate on both and cheaper as used. Tesseract stays selectable (other languages
through ``ocr_language``, no onnxruntime).
Both report a confidence per line (0-100); the caller drops lines below ``ocr_min_confidence`` (by default the
engine's own ``min_confidence``).
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from lucy.allocator import in_use as allocator_in_use
from lucy.errors import LucyError
from lucy.untrusted import remove_format_characters

ENGINES = ("tesseract", "rapidocr")
_SYSTEM_TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata", "/usr/share/tessdata",
    "/usr/local/share/tessdata", "/usr/local/share/tesseract-ocr/tessdata", "/opt/homebrew/share/tessdata",
)
# The model files RapidOCR 3.x ships in its wheel (rapidocr/models/), in the order det, rec, cls.
_RAPID_MODELS = ("PP-OCRv6_det_small.onnx", "PP-OCRv6_rec_small.onnx", "ch_ppocr_mobile_v2.0_cls_mobile.onnx")


@dataclass(frozen=True, slots=True)
class TextLine:
    """One line of text read from a picture."""

    text: str
    confidence: float  # 0-100
    x: float  # centre of the line, as a fraction of the picture's width / height
    y: float
    box: tuple[float, float, float, float] | None = None  # (left, top, right, bottom), fractions as x / y


def line_text(text: str) -> str:
    """A line as OCR read it, as memory keeps it: NFC, no format characters (a zero-width character inside a word
    would hide the word from search), single spaces."""
    return " ".join(remove_format_characters(text).split())


class OcrEngine(Protocol):
    """Reads text lines from a picture. Safe to call from several threads at once."""

    name: str
    version: str
    min_confidence: float  # lines below this are mostly misreadings (measured; overridable in config)
    wants_colour: bool  # True: give it the RGB picture once; False: grey pictures (the captioner may try two)

    def read(self, gray: Image.Image) -> list[TextLine]: ...

    def close(self) -> None: ...


def open_ocr(engine: str, *, languages: str = "eng", tessdata_dir: str = "", threads: int = 1) -> OcrEngine:
    """The OCR engine named ``engine`` (one of :data:`ENGINES`); a :class:`LucyError` that says what to install
    or set when it cannot load."""
    if engine == "tesseract":
        return TesseractEngine(find_tessdata(tessdata_dir, languages), languages, threads)
    if engine == "rapidocr":
        return RapidOcrEngine(threads)
    raise LucyError(f"unknown OCR engine {engine!r}; choose one of {', '.join(ENGINES)}")


class SteadyReads:
    """An :class:`OcrEngine` that reads a picture only when it differs from one read recently: a sign in a fixed
    camera's view is read again for every caption, every fine look and every probe of its first and last time.

    Two pictures are the same when no 4x4-pixel block differs by :attr:`TOLERANCE` levels or more on average (mean
    absolute difference). Measured on the eval tests' videos, a picture decoded again differs by under 2 levels in
    every block, and every pair that OCR read differently by 50 or more; one changed character in a line of text
    10 px high, at a contrast of only 60 levels, moves some block by 5.7 or more (8 px high: 2.75).
    """

    BLOCK = 4
    TOLERANCE = 2.5  # levels (0-255)

    def __init__(self, engine: OcrEngine, *, keep_bytes: int = 16 << 20) -> None:
        self.engine = engine
        self.name, self.version = engine.name, engine.version
        self.min_confidence, self.wants_colour = engine.min_confidence, engine.wants_colour
        self.keep_bytes = keep_bytes
        self.reads = 0  # pictures the engine read
        self.reused = 0  # pictures answered from a recent read
        self._recent: list[tuple[np.ndarray, np.ndarray, list[TextLine]]] = []  # newest first: pixels, sums, lines
        self._lock = threading.Lock()

    def _blocks(self, pixels: np.ndarray) -> tuple[np.ndarray, int]:
        """The sum over channels and pixels of each BLOCK x BLOCK block of ``pixels`` (a sliver smaller than a block
        is one block), and how many values each sum adds up."""
        k = self.BLOCK
        h, w = pixels.shape[0] // k * k, pixels.shape[1] // k * k
        values = pixels.astype(np.int32) if pixels.ndim == 2 else pixels.sum(axis=2, dtype=np.int32)
        channels = 1 if pixels.ndim == 2 else pixels.shape[2]
        if h == 0 or w == 0:
            return values.sum(keepdims=True), values.size * channels
        return values[:h, :w].reshape(h // k, k, w // k, k).sum(axis=(1, 3)), k * k * channels

    def _same(self, a: np.ndarray, b: np.ndarray, limit: float) -> bool:
        """No block of ``a`` and ``b`` differs by ``limit`` (:attr:`TOLERANCE` as a block sum) or more."""
        return float(self._blocks(np.abs(a.astype(np.int16) - b))[0].max()) < limit

    def read(self, gray: Image.Image) -> list[TextLine]:
        pixels = np.asarray(gray)
        # Two blocks whose sums differ by the limit differ by at least as much pixel by pixel: most pictures are ruled
        # out on the sums (a 48th of an RGB picture's values) before their pixels are compared, which took a fifth
        # of the OCR time when every recent picture of a fixed camera was compared in full (py-spy, the eval tests).
        sums, per_block = self._blocks(pixels)
        limit = self.TOLERANCE * per_block
        with self._lock:
            recent = list(self._recent)
        for other, other_sums, lines in recent:
            if (other.shape == pixels.shape and float(np.abs(other_sums - sums).max()) < limit
                    and self._same(other, pixels, limit)):
                with self._lock:
                    self.reused += 1
                return list(lines)
        lines = self.engine.read(gray)
        with self._lock:
            self.reads += 1
            self._recent.insert(0, (pixels, sums, lines))
            held = 0
            for k, (kept, _, _) in enumerate(self._recent):
                held += kept.nbytes
                if held > self.keep_bytes:
                    del self._recent[k:]
                    break
        return list(lines)

    def close(self) -> None:
        with self._lock:
            self._recent.clear()
        self.engine.close()


# ------------------------------------------------------------------------------------------ Tesseract

def find_tessdata(explicit: str, languages: str) -> str:
    """The folder holding ``<lang>.traineddata`` for every language of ``languages`` ("eng+deu")."""
    wanted = languages.split("+")
    prefix = os.environ.get("TESSDATA_PREFIX", "")
    candidates = [explicit] if explicit else [prefix, str(Path(prefix) / "tessdata"), *_SYSTEM_TESSDATA]
    for folder in candidates:
        if folder and all((Path(folder) / f"{lang}.traineddata").is_file() for lang in wanted):
            return folder
    where = explicit or "TESSDATA_PREFIX and " + ", ".join(_SYSTEM_TESSDATA)
    raise LucyError(f"Tesseract language data for {languages!r} not found in {where}; install it "
                    "(Debian: apt-get install tesseract-ocr tesseract-ocr-eng), set captioner.pixels.tessdata_dir, "
                    "choose captioner.pixels.ocr_engine = 'rapidocr', or turn OCR off with "
                    "captioner.pixels.ocr = false")


L_SEVERITY_EXTERNAL, L_SEVERITY_NONE = 0, 6  # Leptonica's message severities (environ.h): "read the env", "none"


def leptonica_library() -> str | None:
    """The Leptonica that this process loaded with Tesseract (tesserocr's wheel bundles its own copy), else the
    system's; None if there is none to be found."""
    import ctypes.util

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:  # Linux: the very file mapped in this process
            for line in maps:
                path = line.split()[-1]
                if "/libleptonica" in path or "/liblept." in path:
                    return path
    except OSError:
        pass  # not Linux
    return ctypes.util.find_library("leptonica") or ctypes.util.find_library("lept")


@functools.cache  # once per process (a second call would do no harm)
def quiet_leptonica() -> bool:
    """Silence Leptonica, Tesseract's image library, for the whole process: it prints messages such as "Error in
    boxClipToRectangle: box outside rectangle" straight to stderr for harmless cases, which fill the server's log.

    Leptonica filters its messages by one global threshold, set by its own ``setMsgSeverity``: set once (through
    ctypes on the loaded library), it holds for every thread, with nothing redirected. (Swapping file descriptor 2
    around each OCR call would also hide the log lines of other threads meanwhile.) ``LEPT_MSG_SEVERITY``, when set,
    is obeyed instead (Leptonica reads it). Returns whether Leptonica was found."""
    import ctypes

    path = leptonica_library()
    try:
        library = ctypes.CDLL(path) if path else None
    except OSError:
        library = None
    if library is None or not hasattr(library, "setMsgSeverity"):
        return False
    library.setMsgSeverity.argtypes, library.setMsgSeverity.restype = [ctypes.c_int], ctypes.c_int
    library.setMsgSeverity(L_SEVERITY_EXTERNAL if os.environ.get("LEPT_MSG_SEVERITY") else L_SEVERITY_NONE)
    return True


class TesseractEngine:
    """A small pool of Tesseract engines; each is used by one thread at a time (Tesseract is not re-entrant).

    Binding: ``tesserocr`` (in-process, releases the GIL) over ``pytesseract`` (a process per call): measured on a
    640x360 frame, 14-80 ms against about 250 ms, almost all of it process start-up.
    """

    name = "tesseract"
    min_confidence = 60.0
    wants_colour = False

    def __init__(self, tessdata: str, languages: str, size: int) -> None:
        try:
            import tesserocr
        except ImportError as err:  # pragma: no cover - depends on the installation
            raise LucyError("captioner.pixels.ocr_engine = 'tesseract' needs tesserocr, which is not installed: "
                            "`pip install tesserocr` plus Debian's tesseract-ocr and tesseract-ocr-eng; or choose "
                            "ocr_engine = 'rapidocr', or set captioner.pixels.ocr = false") from err
        self._tesserocr = tesserocr
        quiet_leptonica()
        self.tessdata, self.languages, self.size = tessdata, languages, max(1, size)
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made = 0
        self._lock = threading.Lock()
        self.version = tesserocr.tesseract_version().split()[1] if tesserocr.tesseract_version() else "?"
        # Engines are made at first use (loading one takes ~0.1 s): a question answered from memory alone never
        # pays for it. Missing language data was already refused by find_tessdata.

    def _new(self) -> Any:
        t = self._tesserocr
        try:
            # LSTM only: no adaptive state carried from one picture to the next, so results do not depend on
            # which engine (thread) read which frame before.
            api = t.PyTessBaseAPI(path=self.tessdata, lang=self.languages, psm=t.PSM.AUTO, oem=t.OEM.LSTM_ONLY)
        except RuntimeError as err:
            raise LucyError(f"Tesseract could not load {self.languages!r} from {self.tessdata}: {err}") from err
        with self._lock:
            self._made += 1
        return api

    def read(self, gray: Image.Image) -> list[TextLine]:
        """Text lines of a grayscale picture, with confidences and centres."""
        try:
            api = self._idle.get_nowait()
        except queue.Empty:
            with self._lock:
                spare = self._made < self.size
            api = self._new() if spare else self._idle.get()
        try:
            return self._read(api, gray)
        finally:
            self._idle.put(api)

    def _read(self, api: Any, gray: Image.Image) -> list[TextLine]:
        t = self._tesserocr
        api.SetImage(gray)
        api.Recognize()
        lines: list[TextLine] = []
        iterator = api.GetIterator()
        level = t.RIL.TEXTLINE
        if iterator is None:
            return lines
        for item in t.iterate_level(iterator, level):
            try:
                text = item.GetUTF8Text(level)
            except RuntimeError:  # tesserocr's way of saying "this line is empty"
                continue
            box = item.BoundingBox(level)
            text = line_text(text or "")
            if not text or box is None:
                continue
            x0, y0, x1, y1 = box
            lines.append(TextLine(text, float(item.Confidence(level)),
                                  (x0 + x1) / 2 / gray.width, (y0 + y1) / 2 / gray.height,
                                  (x0 / gray.width, y0 / gray.height, x1 / gray.width, y1 / gray.height)))
        api.Clear()
        return lines

    def close(self) -> None:
        """Free the idle engines. One still reading is returned to the pool afterwards and stays usable, and
        later reads make new engines as needed, so closing never pulls an engine from under a thread."""
        while True:
            try:
                api = self._idle.get_nowait()
            except queue.Empty:
                return
            api.End()
            with self._lock:
                self._made -= 1


# ------------------------------------------------------------------------------------------- RapidOCR

def rapidocr_models() -> tuple[Path, Path, Path]:
    """The det / rec / cls ONNX files inside the installed ``rapidocr`` package (never downloaded)."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        raise LucyError("captioner.pixels.ocr_engine = 'rapidocr' needs the rapidocr package (and onnxruntime), "
                        "which is not installed: `pip install rapidocr onnxruntime`; or choose ocr_engine = "
                        "'tesseract', or set captioner.pixels.ocr = false")
    folder = Path(spec.origin).parent / "models"
    paths = tuple(folder / name for name in _RAPID_MODELS)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise LucyError(f"RapidOCR's bundled models {', '.join(missing)} are not in {folder}; this rapidocr version "
                        f"ships other files (Lucy never downloads models): install rapidocr 3.x whose wheel carries "
                        "them, or choose captioner.pixels.ocr_engine = 'tesseract'")
    return paths  # type: ignore[return-value]


def _session_memory_settings() -> None:
    """Make RapidOCR's onnxruntime sessions run without memory patterns, and keep their memory in onnxruntime's own
    arena unless the process runs on jemalloc (idempotent).

    onnxruntime keeps a memory plan for every input shape it has seen; the recogniser's input width follows the
    text it reads, so a long-running captioner met ever more shapes and its memory grew with every caption
    (measured: 90 captions of busy 640x360 frames, 1090 MB with patterns, 584 MB without, same text read).
    RapidOCR also turns onnxruntime's CPU arena off, so every tensor of every run was malloc'd and freed: glibc kept
    each thread's high-water mark in that thread's malloc arena, and the captioner's reads run on whichever
    executor thread is free, so RSS crept up with each thread that met a large input (measured with
    bench/ocr_memory.py: 2 engines read from 6 threads, 97 frames of 320x180-1280x720 with 1-4 lines: 945 MiB after
    50 reads, 1063 after 300 without the arena; with it and one line per recogniser batch, 689 after 100, 709 after
    600). With the arena each session reuses its own memory, whichever thread runs it: it grows to the largest
    input it meets and stays there. (Shrinking the arena after each run, ``memory.enable_memory_arena_shrinkage``,
    hands the memory back to glibc and grew RSS again: 942 -> 1204 MiB.)
    On jemalloc (:mod:`lucy.allocator`: every ``lucy serve`` and its stream workers) the arena is left off: jemalloc
    hands freed pages back within a second whichever thread freed them, so a session holds memory only while it
    reads (same probe, 300 reads, two runs: 592 and 596 MiB with the arena, creeping; 402 and 427 without), for some
    10-20 % more CPU per read (181 -> 215 and 211 -> 230 ms: pages handed back are faulted in again).
    RapidOCR builds its session options itself and offers no switch for these, so its builder is wrapped.
    """
    try:
        from rapidocr.inference_engine.onnxruntime import main as ort_main
    except ImportError:  # another rapidocr layout: run with its defaults
        return
    session = getattr(ort_main, "OrtInferSession", None)
    build = getattr(session, "_init_sess_opts", None)
    if build is None or getattr(build, "lucy_memory_settings", False):
        return

    def options(cfg: Any) -> Any:
        opts = build(cfg)
        opts.enable_mem_pattern = False
        opts.enable_cpu_mem_arena = allocator_in_use() != "jemalloc"
        return opts

    options.lucy_memory_settings = True  # type: ignore[attr-defined]
    session._init_sess_opts = staticmethod(options)


class RapidOcrEngine:
    """PP-OCR through RapidOCR, one onnxruntime session pair per worker thread (sessions run one call at a time
    here, one intra-op thread each: the captioner already runs ``threads`` frames in parallel)."""

    name = "rapidocr"
    # PP-OCR's recogniser is confident even on mush (a 5-px-high "EXIT 7B LEFT" read as "EX0T7BLEFT" at 85):
    # its right readings score 95-100, so the floor sits higher than Tesseract's.
    min_confidence = 80.0
    wants_colour = True

    def __init__(self, size: int) -> None:
        import importlib.metadata
        import importlib.util

        det, rec, cls = rapidocr_models()
        if importlib.util.find_spec("onnxruntime") is None:  # pragma: no cover - depends on the installation
            raise LucyError("rapidocr needs onnxruntime, which is not installed: `pip install onnxruntime`, or choose "
                            "captioner.pixels.ocr_engine = 'tesseract'")
        self._params = {
            "Global.log_level": "error", "Global.use_cls": False,  # video text is upright; cls costs ~20%
            "Det.model_path": str(det), "Rec.model_path": str(rec), "Cls.model_path": str(cls),
            # Text is found on the picture shrunk to 640 px on its long side (RapidOCR's default enlarges it to 736 px
            # on its SHORT side): measured on 720p frames, 75 ms instead of 300 ms, the same characters read.
            "Det.limit_side_len": 640, "Det.limit_type": "max",
            # One text line per recogniser run, not six padded to the widest: a batch of long lines needed ~280 MiB
            # at its peak, one line ~120 MiB (measured on 640x360 and 720p frames with four 43-character lines); on
            # 97 generated frames it read 4 lines better (two words no longer run together) and dropped 3 junk lines
            # below the floor, with less CPU (no padding: 113 against 124-159 ms per frame).
            "Rec.rec_batch_num": 1,
            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        self.version = importlib.metadata.version("rapidocr")
        self.size = max(1, size)
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made = 0
        self._lock = threading.Lock()
        # Sessions are made at first use, as Tesseract's engines are: importing rapidocr (~45 MiB) and loading its
        # models (~160 MiB with onnxruntime, bench/soak.py --memory-budget) is paid only by a process that reads text
        # (a server's questions answered from memory never do). What can be checked without loading (the package,
        # its model files, onnxruntime) was checked above, so a broken install still fails at start.

    def _new(self) -> Any:
        try:
            from rapidocr import RapidOCR

            _session_memory_settings()
            return RapidOCR(params=self._params)
        except Exception as err:  # onnxruntime / rapidocr raise many types; all mean "cannot load"
            with self._lock:
                self._made -= 1  # the slot reserved in read
            raise LucyError(f"RapidOCR could not load its bundled models: {err}") from err

    def read(self, gray: Image.Image) -> list[TextLine]:
        try:
            engine = self._idle.get_nowait()
        except queue.Empty:
            with self._lock:  # the slot is taken before loading: threads starting at once make no more than size
                spare = self._made < self.size
                self._made += spare
            engine = self._new() if spare else self._idle.get()
        try:
            picture = np.asarray(gray.convert("RGB"))  # colour or grey: PP-OCR was trained on colour
            result = engine(picture)
        finally:
            self._idle.put(engine)
        if result.boxes is None or result.txts is None:
            return []
        pieces = []
        for box, text, score in zip(result.boxes, result.txts, result.scores, strict=True):
            box = np.asarray(box, dtype=np.float64)
            text = line_text(text)
            if text:
                pieces.append((text, float(score) * 100.0, float(box[:, 0].min()),
                               float(box[:, 0].max()), float(box[:, 1].min()), float(box[:, 1].max())))
        return [TextLine(text, confidence, (x0 + x1) / 2 / gray.width, (y0 + y1) / 2 / gray.height,
                         (x0 / gray.width, y0 / gray.height, x1 / gray.width, y1 / gray.height))
                for text, confidence, x0, x1, y0, y1 in _join_rows(pieces)]

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._made -= 1


def _join_rows(pieces: list[tuple[str, float, float, float, float, float]]
               ) -> list[tuple[str, float, float, float, float, float]]:
    """RapidOCR splits a line at wide gaps ("PLATFORM" | "4 EXIT"): join pieces on one baseline whose gap is under
    two text heights, left to right, so a sign reads as one line (as Tesseract gives it). Confidence = the least."""
    out: list[tuple[str, float, float, float, float, float]] = []
    for piece in sorted(pieces, key=lambda p: (p[2], p[4])):
        text, conf, x0, x1, y0, y1 = piece
        height = y1 - y0
        for k, (t2, c2, a0, a1, b0, b1) in enumerate(out):
            same_row = abs((b0 + b1) / 2 - (y0 + y1) / 2) < 0.35 * max(height, b1 - b0)
            if same_row and -max(height, b1 - b0) <= x0 - a1 < 2.0 * max(height, b1 - b0):
                out[k] = (f"{t2} {text}", min(c2, conf), a0, x1, min(b0, y0), max(b1, y1))
                break
        else:
            out.append(piece)
    return sorted(out, key=lambda p: (p[4], p[2]))
