"""``lucy config show``: the effective configuration, as TOML that can be pasted into ``lucy.toml`` (or as JSON)."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucy.cli.common import ConfigOption, DataOption, JsonOption, PresetOption, VerboseOption, load

if TYPE_CHECKING:
    from lucy.config import LucySettings

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def show(as_json: JsonOption = False, data: DataOption = None, config: ConfigOption = None,
         preset: PresetOption = None, verbose: VerboseOption = 0) -> int:
    """Print the effective configuration (file, then LUCY_* variables, then flags) as TOML for lucy.toml."""
    settings = load(data, config, preset, verbose, logs=False)  # nothing here logs; logging would import av
    if as_json:
        shown = settings.model_dump(mode="json")
        shown["levels"] = settings.levels.model_dump(mode="json")
        print(json.dumps(shown, indent=2))
        return 0
    text = settings_toml(settings)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.syntax import Syntax

        Console().print(Syntax(text, "toml", theme="ansi_dark", background_color="default", word_wrap=True))
    else:
        sys.stdout.write(text)
    return 0


def settings_toml(settings: LucySettings) -> str:
    """``settings`` as a TOML document that :func:`lucy.config.load_settings` reads back to the same settings.

    TOML has no null: unset values are shown as comments, and so are secrets (never printed; set them in the file
    or in their ``LUCY_*`` variable). The preset's memory levels follow, as comments: they come with ``preset``.
    """
    from lucy.config import PRESETS

    lines = ["# Lucy's effective configuration (lucy.toml, then LUCY_* variables, then flags).",
             "# Paste into lucy.toml and keep what you want to change; unset values and secrets are comments.", ""]
    lines += _table(settings.model_dump(mode="python"), ())
    levels = settings.levels
    lines += ["", f"# Memory levels of preset {settings.preset!r} (presets: {', '.join(PRESETS)}):"]
    for name in ("coarse", "fine", "ultra_fine"):
        spec = getattr(levels, name)
        lines.append(f"#   {name:<10} span_seconds = {_value(spec.span_seconds)}, fps = {_value(spec.fps)}")
    return "\n".join(lines) + "\n"


def _table(values: dict[str, Any], path: tuple[str, ...]) -> list[str]:
    """The lines of one TOML table: its own keys, then its sub-tables (each under its ``[a.b]`` header)."""
    lines, tables = [], []
    for key, value in values.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif value is None:
            lines.append(f"# {_key(key)} = (not set)")
        elif type(value).__name__ in ("SecretStr", "SecretBytes"):
            where = "LUCY_" + "__".join(p.upper() for p in (*path, key))
            lines.append(f"# {_key(key)} = (secret: not shown; set it here or in {where})")
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, table in tables:
        inner = (*path, key)
        lines += ["", f"[{'.'.join(_key(k) for k in inner)}]", *_table(table, inner)]
    return lines


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, except that TOML wants DEL escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str | Path):
        return _string(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")
