"""Level and backend names are defined once (lucy.config.names); settings, the API, the CLI and the stream manager
take them from there."""

from __future__ import annotations

import typing
from collections.abc import Callable

import pytest

from lucy.cli.ask import ask
from lucy.cli.ingest import ingest
from lucy.cli.memory import SPEECH_LEVEL
from lucy.config import (
    CAPTIONER_BACKENDS,
    FRAME_CODECS,
    REASONER_BACKENDS,
    Level,
    LucySettings,
    check_level_name,
    is_level_name,
    summary_depth,
    summary_level,
)
from lucy.service.schemas import StreamCreate


def test_level_names():
    assert [level.value for level in Level] == ["coarse", "fine", "ultra_fine"]
    assert [level.depth for level in Level] == [0, 1, 2] and Level.FINE.deeper is Level.ULTRA_FINE
    assert summary_level(1) == "summary1" and summary_depth("summary12") == 12
    assert summary_depth("coarse") == summary_depth("summaryX") == 0
    for name in ("coarse", "fine", "ultra_fine", "summary1", "summary99"):
        assert is_level_name(name) and check_level_name(name) == name
    for name in ("medium", "summary0", "summary100", "Coarse", "coarse ", "summary", ""):
        assert not is_level_name(name)
    with pytest.raises(ValueError, match=r"unknown level 'medium': use coarse, fine, ultra_fine or summaryN"):
        check_level_name("medium")
    with pytest.raises(ValueError):
        summary_level(0)


def _choices(command: Callable[..., object], parameter: str) -> tuple[str, ...]:
    """The choices a CLI option offers: the Literal of its ``Annotated[Literal[...] | None, typer.Option(...)]``."""
    optional = typing.get_args(typing.get_type_hints(command, include_extras=True)[parameter])[0]
    literal = next(t for t in typing.get_args(optional) if t is not type(None))
    return typing.get_args(literal)


def test_backend_names_come_from_one_place():
    assert CAPTIONER_BACKENDS == ("pixels", "openai", "vllm", "none")
    assert REASONER_BACKENDS == ("lexical", "openai") and FRAME_CODECS == ("jpeg", "jpeg420", "jpegxl", "zstd")
    fields = LucySettings.model_fields
    captioner = fields["captioner"].annotation.model_fields["backend"].annotation
    reasoner = fields["reasoner"].annotation.model_fields["backend"].annotation
    codec = fields["ingest"].annotation.model_fields["codec"].annotation
    assert typing.get_args(captioner) == CAPTIONER_BACKENDS and typing.get_args(reasoner) == REASONER_BACKENDS
    assert typing.get_args(codec) == FRAME_CODECS
    api = StreamCreate.model_json_schema()["properties"]["captioner"]["anyOf"][0]["enum"]
    assert tuple(api) == CAPTIONER_BACKENDS
    assert _choices(ingest, "captioner") == _choices(ask, "captioner") == CAPTIONER_BACKENDS
    assert _choices(ask, "reasoner") == REASONER_BACKENDS


def test_the_cli_speech_level_is_the_transcribers_one():
    from lucy.memory.transcribers import SPEECH_LEVEL as TRANSCRIBERS_SPEECH_LEVEL

    assert SPEECH_LEVEL == TRANSCRIBERS_SPEECH_LEVEL
