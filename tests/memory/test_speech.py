"""Speech into memory: the transcriber boundary, the embedded Whisper on espeak-ng speech, an OpenAI-compatible
transcription server, and the coarse builder transcribing each closed span's audio beside its captions."""

from __future__ import annotations

import asyncio
import email
import json
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import AUDIO_RATE, AudioClip
from lucy.memory.builder import CoarseBuilder
from lucy.memory.nodes import INGEST_ORIGIN
from lucy.memory.speech import SpeechWorker
from lucy.memory.transcribers import (
    SPEECH_LEVEL,
    Transcriber,
    TranscriberError,
    TranscriptLine,
    format_transcript,
    make_transcriber,
    parse_transcript,
)
from lucy.wiring import open_frames, open_memory

SR = AUDIO_RATE
ANNOUNCEMENT = "Flight 714 now boarding at gate B 12"


def espeak(text: str, path: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng, as mono float32 at 16 kHz."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
    import av

    out = []
    with av.open(str(path)) as container:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SR)
        for frame in container.decode(audio=0):
            out += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
        out += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    return np.concatenate(out).astype(np.float32)


@dataclass
class ScriptedTranscriber(Transcriber):
    """Says ``words`` for each stretch of sound in a clip (at its times); fails the calls ``fail`` names."""

    words: str = ANNOUNCEMENT
    fail: set[int] = field(default_factory=set)
    calls: list[tuple[float, float]] = field(default_factory=list)
    closed: bool = False
    name: str = "scripted"
    model: str = "scripted-ear"

    async def transcribe(self, clip: AudioClip) -> list[TranscriptLine]:
        self.calls.append((clip.start, clip.end))
        if len(self.calls) in self.fail:
            raise TranscriberError("scripted failure")
        loud = np.flatnonzero(np.abs(clip.samples) > 0.05)
        if not len(loud):
            return []
        runs = np.split(loud, np.flatnonzero(np.diff(loud) > SR // 2) + 1)  # one line per stretch of sound
        return [TranscriptLine(clip.start + run[0] / SR, clip.start + run[-1] / SR, self.words, 0.9) for run in runs]

    async def aclose(self) -> None:
        self.closed = True


def test_transcript_text_round_trips():
    lines = [TranscriptLine(64.69, 68.7, " Flight 714,  now boarding. "), TranscriptLine(70.0, 71.25, "Thank you")]
    text = format_transcript(lines)
    assert text == "[64.7-68.7 s] Flight 714, now boarding.\n[70.0-71.2 s] Thank you"
    assert parse_transcript(text) == [TranscriptLine(64.7, 68.7, "Flight 714, now boarding."),
                                      TranscriptLine(70.0, 71.2, "Thank you")]
    assert format_transcript([]) == "" and parse_transcript("") == []


def test_backend_none_makes_no_transcriber(tmp_path):
    assert make_transcriber(load_settings(data=tmp_path, **{"transcriber.backend": "none"})) is None
    with pytest.raises(ValueError):
        load_settings(data=tmp_path, **{"transcriber.backend": "kaldi"})


def test_whisper_hears_an_announcement_with_its_time_and_nothing_in_silence(tmp_path):
    speech = espeak(ANNOUNCEMENT, tmp_path / "a.wav")
    silence = np.zeros(5 * SR, np.float32)
    clip = AudioClip(np.concatenate([silence, speech, silence]), SR, 60.0)
    ear = make_transcriber(load_settings(data=tmp_path))
    assert ear is not None and ear.name == "whisper"

    async def run():
        try:
            return (await ear.transcribe(clip), await ear.transcribe(AudioClip(silence, SR, 0.0)),
                    await ear.transcribe(AudioClip(np.random.default_rng(0).normal(0, 0.02, 8 * SR)
                                                   .astype(np.float32), SR, 0.0)))
        finally:
            await ear.aclose()

    lines, quiet, hiss = asyncio.run(run())
    assert len(lines) == 1
    said = lines[0]
    assert "714" in said.text and "b12" in said.text.lower().replace(" ", "")
    assert abs(said.start - 65.0) < 1.0 and abs(said.end - (65.0 + len(speech) / SR)) < 1.0
    assert 0 < said.confidence <= 1
    assert quiet == [] and hiss == []


class _Transcriptions(BaseHTTPRequestHandler):
    """``POST /v1/audio/transcriptions`` as speaches and vLLM serve it, answered by the embedded Whisper."""

    ear: Transcriber
    requests: list[dict[str, str]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        message = email.message_from_bytes(
            f"content-type: {self.headers['content-type']}\r\n\r\n".encode() + body)
        fields, audio = {}, b""
        for part in message.get_payload():
            name = part.get_param("name", header="content-disposition")
            if name == "file":
                audio = part.get_payload(decode=True)
            else:
                fields[name] = part.get_payload(decode=True).decode()
        self.requests.append(fields)
        if self.path != "/v1/audio/transcriptions" or not audio:
            self.send_response(404)
            self.end_headers()
            return
        pcm = np.frombuffer(audio[44:], "<i2").astype(np.float32) / 32767.0
        lines = asyncio.run(self.ear.transcribe(AudioClip(pcm, SR, 0.0)))
        reply = {"text": " ".join(line.text for line in lines), "language": "en",
                 "segments": [{"id": i, "start": line.start, "end": line.end, "text": line.text,
                               "avg_logprob": float(np.log(line.confidence)), "no_speech_prob": 0.01}
                              for i, line in enumerate(lines)]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_openai_backend_on_a_transcription_server(tmp_path):
    speech = espeak(ANNOUNCEMENT, tmp_path / "a.wav")
    handler = type("Handler", (_Transcriptions,), {"ear": make_transcriber(load_settings(data=tmp_path)),
                                                   "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = load_settings(data=tmp_path, **{
            "transcriber.backend": "openai", "transcriber.openai.model": "Systran/faster-whisper-tiny.en",
            "transcriber.openai.base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        ear = make_transcriber(settings)
        clip = AudioClip(np.concatenate([np.zeros(2 * SR, np.float32), speech]), SR, 120.0)

        async def run():
            try:
                return await ear.transcribe(clip)
            finally:
                await ear.aclose()

        lines = asyncio.run(run())
        assert len(lines) == 1 and "714" in lines[0].text and abs(lines[0].start - 122.0) < 1.0
        assert handler.requests[0]["model"] == "Systran/faster-whisper-tiny.en"
        assert handler.requests[0]["response_format"] == "verbose_json"
        assert handler.requests[0]["language"] == "en"
    finally:
        server.shutdown()
        server.server_close()

    # A server that is not there: a TranscriberError (the builder retries), not a crash.
    gone = make_transcriber(load_settings(data=tmp_path, **{
        "transcriber.backend": "openai", "transcriber.openai.max_retries": 0,
        "transcriber.openai.base_url": f"http://127.0.0.1:{server.server_port}/v1"}))
    with pytest.raises(TranscriberError):
        asyncio.run(gone.transcribe(clip))


# ------------------------------------------------------------------------------------------------ the builder

def store_stream(settings, *, seconds: float, audio: np.ndarray | None, name: str = "cam") -> None:
    """A finished stream of ``seconds`` of plain frames at 2 fps, with ``audio`` from media time 0 (None: none)."""
    writer = open_frames(settings).create(name, source="/v.mp4", live=False, width=48, height=32, stored_fps=2.0,
                                          codec="zstd", quality=90, audio=audio is not None)
    times = np.arange(0, seconds, 0.5)
    writer.append(np.full((len(times), 32, 48, 3), 90, np.uint8), times)
    if audio is not None:
        writer.append_audio(audio, 0.0)
    writer.mark_finished(complete=True, lost=None)


def beep(seconds: float, at: float, total: float) -> np.ndarray:
    audio = np.zeros(round(total * SR), np.float32)
    i = round(at * SR)
    audio[i:i + round(seconds * SR)] = 0.5 * np.sin(np.arange(round(seconds * SR)) * 0.3)
    return audio


def transcribing(settings, captioner, transcriber, memory) -> tuple[CoarseBuilder, SpeechWorker]:
    """A started builder of stream "cam" with a speech listener (as a recording attaches one), and the listener."""
    worker = SpeechWorker(settings, "cam", memory, transcriber)
    return CoarseBuilder(settings, "cam", memory, captioner, poll_seconds=0.2, listeners=[worker],
                         frames=open_frames(settings)).start(), worker


def build(settings, captioner, transcriber, memory) -> SpeechWorker:
    builder, worker = transcribing(settings, captioner, transcriber, memory)
    try:
        assert builder.drain(timeout=60)
    finally:
        builder.stop()
    return worker


def test_builder_transcribes_each_closed_span_beside_its_caption(tmp_path, clip_captioner):
    settings = load_settings(data=tmp_path / "data", **{"memory.retry_initial_seconds": 0.05})
    store_stream(settings, seconds=150, audio=beep(3.0, at=70.0, total=150))
    memory = open_memory(settings)
    ear = ScriptedTranscriber(fail={1, 2})  # the first two attempts fail: retried, captions not held up
    worker = build(settings, clip_captioner(), ear, memory)
    captions = memory.nodes("cam", level="coarse")
    speech = memory.nodes("cam", level=SPEECH_LEVEL)
    assert [(n.start, n.end) for n in captions] == [(n.start, n.end) for n in speech] == \
        [(0.0, 60.0), (60.0, 120.0), (120.0, pytest.approx(150.0))]
    assert all(n.origin == INGEST_ORIGIN and n.model == "scripted-ear" for n in speech)
    assert [n.text for n in speech] == ["", f"[70.0-73.0 s] {ANNOUNCEMENT}", ""]  # silent spans: no lines
    assert memory.search("cam", "boarding gate")[0][0].level == SPEECH_LEVEL
    stats = worker.stats.snapshot()
    assert stats.has_audio and stats.transcribed == 3 and stats.lines == 1 and stats.failures == 2
    assert stats.transcribed_until == pytest.approx(150.0) and stats.lag == 0.0 and stats.realtime_factor > 0
    assert ear.closed

    # Resume: a second run transcribes nothing again.
    again = ScriptedTranscriber()
    build(settings, clip_captioner(), again, memory)
    assert again.calls == [] and memory.count("cam", level=SPEECH_LEVEL) == 3


def test_a_stream_without_audio_is_left_as_before(tmp_path, clip_captioner):
    settings = load_settings(data=tmp_path / "data")
    store_stream(settings, seconds=90, audio=None)
    memory = open_memory(settings)
    ear = ScriptedTranscriber()
    worker = build(settings, clip_captioner(), ear, memory)
    assert ear.calls == [] and memory.count("cam", level=SPEECH_LEVEL) == 0
    assert memory.count("cam", level="coarse") == 2
    assert not worker.stats.snapshot().has_audio


def test_a_failing_transcriber_never_holds_up_captions(tmp_path, clip_captioner):
    settings = load_settings(data=tmp_path / "data", **{"memory.retry_initial_seconds": 0.05,
                                                        "memory.retry_max_seconds": 0.1})
    store_stream(settings, seconds=120, audio=beep(1.0, at=10.0, total=120))
    memory = open_memory(settings)
    ear = ScriptedTranscriber(fail=set(range(1, 10_000)))
    builder, worker = transcribing(settings, clip_captioner(), ear, memory)
    try:
        assert not builder.drain(give_up_seconds=1.0, timeout=30)  # the transcriber is down: drain gives up
        assert memory.count("cam", level="coarse") == 2 and memory.count("cam", level=SPEECH_LEVEL) == 0
        assert worker.stats.failures >= 2 and worker.stats.pending == 2
    finally:
        builder.stop()


def test_the_openai_captioner_is_given_the_span_transcript(tmp_path):
    from lucy.backends import builder_captioner
    from lucy.testing.openai_server import Reply, ScriptedOpenAIServer

    with ScriptedOpenAIServer([Reply("a departures hall")]) as server:
        settings = load_settings(data=tmp_path / "data", **{
            "captioner.backend": "openai", "captioner.openai.base_url": server.base_url,
            "captioner.openai.max_frames": 2})
        store_stream(settings, seconds=150, audio=beep(3.0, at=70.0, total=150))
        memory = open_memory(settings)
        build(settings, builder_captioner(settings), ScriptedTranscriber(), memory)
        texts = {}
        for body in server.requests:
            parts = [p["text"] for p in body["messages"][1]["content"] if p["type"] == "text"]
            start = float(parts[0].split("from ")[1].split(" s")[0])
            texts[start // 60] = "\n".join(parts)
    assert sorted(texts) == [0, 1, 2]
    assert "<speech>" not in texts[0] and "<speech>" not in texts[2]  # silent spans: nothing to pass
    assert f"<speech>\n[70.0-73.0 s] {ANNOUNCEMENT}\n</speech>" in texts[1]
    assert texts[1].index("<speech>") < texts[1].index("<instruction>")


def test_a_live_stream_whose_sound_dropped_out_is_transcribed_with_what_there_is(tmp_path, clip_captioner):
    settings = load_settings(data=tmp_path / "data")
    writer = open_frames(settings).create("cam", source="rtsp://cam/1", live=True, width=48, height=32,
                                          stored_fps=2.0, codec="zstd", quality=90, audio=True)
    writer.append_audio(beep(2.0, at=10.0, total=70.0), 0.0)  # sound for 70 s, then none; pictures go on
    times = np.arange(0, 200, 0.5)
    writer.append(np.full((len(times), 32, 48, 3), 90, np.uint8), times)
    memory = open_memory(settings)
    ear = ScriptedTranscriber()
    builder, _ = transcribing(settings, clip_captioner(), ear, memory)
    try:
        assert builder.drain(timeout=60)  # closed spans 0-180 s: none waits for sound that is not coming
    finally:
        builder.stop()
    speech = memory.nodes("cam", level=SPEECH_LEVEL)
    assert [(n.start, n.end) for n in speech] == [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0)]
    assert speech[0].text.startswith("[10.0-12.0 s]") and speech[1].text == speech[2].text == ""
    assert ear.calls == [(0.0, 60.0), (50.0, 70.0)]  # (10 s of lead-in); the span with no sound is not sent


def test_words_said_across_a_span_boundary_are_heard_whole_once(tmp_path, clip_captioner):
    settings = load_settings(data=tmp_path / "data")
    audio = beep(3.0, at=58.5, total=150) + beep(1.0, at=20.0, total=150) + beep(1.0, at=118.7, total=150)
    store_stream(settings, seconds=150, audio=audio)
    memory = open_memory(settings)
    ear = ScriptedTranscriber(words="said")
    build(settings, clip_captioner(), ear, memory)
    lines = {n.start: parse_transcript(n.text) for n in memory.nodes("cam", level=SPEECH_LEVEL)}
    # Each span hears 10 s before its start; a line is kept by the span its end falls in.
    assert [(line.start, line.end) for line in lines[0.0]] == [(20.0, 21.0)]
    assert [(line.start, line.end) for line in lines[60.0]] == [(58.5, 61.5)]  # cut at 60 s in the first span
    assert [(line.start, line.end) for line in lines[120.0]] == [(118.7, 119.7)]  # ends within 1 s of 120 s
    assert sorted(ear.calls) == [(0.0, 60.0), (50.0, 120.0), (110.0, 150.0)]
