"""Text Lucy did not write: what people type, normalised once where it enters, and what the video shows, made
harmless wherever it is put into a prompt.

*Typed text* (questions, options, watches, search queries). Two strings that look the same must be the same
question: a zero-width space inside a word would make it another word to full-text search, a question made only of
format characters would look non-empty and run a full backtrack, and "Red" with a zero-width joiner would be a
second option beside "Red". So every edge (HTTP, chat, MQTT, the CLI) passes what it is given through
:func:`normalise_question` (or :func:`clean_text` for multi-line text) before anything else looks at it.

*Video text* (captions, OCR, transcripts, answers that quote them, instructions an agent wrote from them) is data:
prompts show it between tags, passed through :func:`neutralise`, so that it cannot close its block, open a fake
one, or start a line that reads as a chat role or a prompt's own label (``SYSTEM:``, ``Question:``).

:func:`strip_nul` is the part every store needs: PostgreSQL refuses U+0000 in text, SQLite keeps it; memory text
goes through it on its one way into either store, so both hold the same.

This module is a leaf: every layer may import it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from lucy.errors import InputError

_KEEP_CONTROLS = frozenset("\n\t")
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")  # CR, CRLF, line/paragraph separators, NEL: one newline


def _dropped(char: str) -> bool:
    # Cf: zero-width space/joiners, word joiner, BOM, soft hyphen, bidi controls; Cc: NUL and other C0/C1 controls.
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and char not in _KEEP_CONTROLS)


def clean_text(text: str) -> str:
    """``text`` in NFC, without format characters (category Cf) and without control characters other than newline
    and tab (NUL included); line breaks of any kind become ``\\n``. Spacing is kept (multi-line text)."""
    text = unicodedata.normalize("NFC", _NEWLINES.sub("\n", text))
    if text.isascii() and text.isprintable():
        return text
    return "".join(c for c in text if not _dropped(c))


def remove_format_characters(text: str) -> str:
    """``text`` in NFC without format characters (Cf): for text read from video (OCR), where a zero-width
    character inside a word would hide the word from search. Controls and spacing are left as they are."""
    text = unicodedata.normalize("NFC", text)
    return text if text.isascii() else "".join(c for c in text if unicodedata.category(c) != "Cf")


def normalise_line(text: str) -> str:
    """:func:`clean_text`, then every run of whitespace (newlines included) as one space, trimmed."""
    return " ".join(clean_text(text).split())


def normalise_question(question: str, options: Iterable[str] = (), *,
                       what: str = "question") -> tuple[str, tuple[str, ...]]:
    """The question and its options, each :func:`normalise_line`-d. Raises :class:`InputError` when the question
    is empty after normalisation, an option is, or two options are the same (ignoring case)."""
    text = normalise_line(question)
    if not text:
        raise InputError(f"the {what} is empty (after removing invisible and control characters)")
    cleaned = tuple(normalise_line(o) for o in options)
    if any(not o for o in cleaned):
        raise InputError("an option is empty (after removing invisible and control characters)")
    seen: dict[str, str] = {}
    for option in cleaned:
        key = option.casefold()
        if key in seen:
            raise InputError(f"the options {_shown(seen[key])} and {_shown(option)} are the same: every option "
                             "must differ")
        seen[key] = option
    return text, cleaned


def _shown(option: str, chars: int = 60) -> str:
    """An option as an error message quotes it: cut (an ellipsis marks the cut), never a whole long text."""
    return repr(option if len(option) <= chars else option[:chars - 1] + "…")


def strip_nul(text: str) -> str:
    """``text`` without U+0000 (which PostgreSQL cannot store in text and SQLite can)."""
    return text.replace("\0", "") if "\0" in text else text


# A line of video text that begins like a chat role or like one of the prompts' own labels would read as one.
_ROLE_LINE = re.compile(
    r"^([\s>›#*\-]*)(system|user|assistant|developer|human|ai|tool|instructions?|question|options?|answer|watch)"
    r"\s*:", re.IGNORECASE | re.MULTILINE)


def neutralise(text: str) -> str:
    """Video text made safe to show between tags in a prompt: angle brackets become ``‹ ›`` (it cannot close the
    block or open a tag or a chat-template token), code fences become quotes, and a role or label at the start of a
    line (``SYSTEM:``) is marked as quoted text (``SYSTEM (quoted):``)."""
    text = text.replace("<", "‹").replace(">", "›").replace("```", "'''")
    return _ROLE_LINE.sub(r"\1\2 (quoted):", text)
