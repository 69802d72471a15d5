"""Level and backend names are defined once (lucy.config.names); settings, the API, the CLI and the stream manager
take them from there."""

from __future__ import annotations

import argparse
import typing

import pytest

from lucy.cli import build_parser
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


def _choices(parser: argparse.ArgumentParser, command: str, option: str) -> tuple[str, ...]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return tuple(next(a for a in sub._actions if option in a.option_strings).choices)


def test_backend_names_come_from_one_place():
    assert CAPTIONER_BACKENDS == ("pixels", "openai", "vllm", "none")
    assert REASONER_BACKENDS == ("lexical", "openai") and FRAME_CODECS == ("jpeg", "jpegxl", "zstd")
    fields = LucySettings.model_fields
    captioner = fields["captioner"].annotation.model_fields["backend"].annotation
    reasoner = fields["reasoner"].annotation.model_fields["backend"].annotation
    codec = fields["ingest"].annotation.model_fields["codec"].annotation
    assert typing.get_args(captioner) == CAPTIONER_BACKENDS and typing.get_args(reasoner) == REASONER_BACKENDS
    assert typing.get_args(codec) == FRAME_CODECS
    api = StreamCreate.model_json_schema()["properties"]["captioner"]["anyOf"][0]["enum"]
    assert tuple(api) == CAPTIONER_BACKENDS
    parser = build_parser()
    assert _choices(parser, "ingest", "--captioner") == _choices(parser, "ask", "--captioner") == CAPTIONER_BACKENDS
    assert _choices(parser, "ask", "--reasoner") == REASONER_BACKENDS
