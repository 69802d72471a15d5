"""What a chat conversation asks of a stream (:func:`read`), for ``POST /v1/chat/completions``.

Chat front-ends send a model three kinds of request, and only one of them is a question about the video:

- a *task*: a prompt the front-end writes itself, as one user message, to name or tag the chat or to suggest what
  to ask next. Open WebUI's title, tags, follow-up, search-query, autocomplete and emoji prompts are recognised by
  their form (:func:`task_of`): a ``### Task:`` heading or a ``<chat_history>`` block, or the emoji prompt's opening;
  other front-ends' title prompts by asking to generate a title for the conversation. Lucy answers them here, in the
  format the prompt asks for (JSON with the key it names, or plain text), from the conversation they quote and the
  stream's name: no caption, no reasoner call;
- *small talk*: a message made only of greetings, thanks, farewells, acknowledgements and questions about Lucy
  itself ("hi", "thanks a lot!", "ok bye", "who are you?"), at most eight words (:func:`small_talk_of`): answered
  with what memory holds, no caption, no reasoner call;
- everything else is a *question*, asked of the stream's memory by the query engine. When it leans on earlier turns
  ("What colour was it?", "and after that?"), the question the engine gets carries them (:func:`with_context`), in
  plain words that the embedded lexical reasoner matches and that a chat model reads; its prompts show them apart
  from the question, as quoted data (the answers quote on-screen text, which is never an instruction).

Every message's text is normalised first (:func:`lucy.untrusted.clean_text`: no invisible or control characters), so
that a message made only of zero-width characters is empty, not a question.

The rules are narrow on purpose: a message that is not plainly a task or plainly small talk is a question, so that
a real question never gets a canned reply; at worst, small talk phrased in an unexpected way costs a question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lucy.text import FOLLOW_UP_OPENING, STOPWORDS
from lucy.untrusted import clean_text


class Kind(StrEnum):
    QUESTION = "question"
    SMALL_TALK = "small_talk"
    TASK = "task"


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" or "assistant"
    text: str


@dataclass(frozen=True, slots=True)
class Reading:
    """What the last user message of a conversation is, and how to answer it.

    ``question``: what the query engine is asked (``text``, with the earlier turns it leans on); ``task``: which
    front-end task (``title``, ``tags``, ``follow_ups``, ``queries``, ``autocomplete``, ``emoji``, ``image_prompt``,
    ``other``); ``small_talk``: which kind (``greeting``, ``thanks``, ``farewell``, ``ack``, ``about``); ``why``:
    the rule that decided, in words (it rides along in the answer object)."""

    kind: Kind
    text: str
    why: str
    question: str = ""
    task: str = ""
    json_key: str | None = None  # the task wants a JSON object with this key (None: plain text)
    small_talk: str = ""
    history: tuple[Turn, ...] = field(default_factory=tuple)  # the conversation a task quotes, or the chat's own


# ------------------------------------------------------------------------------------------------ messages


_REASONING = re.compile(r"<details\b[^>]*>.*?</details>|<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_NOTES = re.compile(r"^\s*(Evidence: .*|\(Not confident[^)]*\)\s*)$", re.MULTILINE)


def message_text(content: Any) -> str:
    """The text of a message's content (a string, or the text parts of a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "\n".join(str(p) for p in parts)
    return ""


def turns(messages: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """The user and assistant turns (system and tool messages left out); an assistant's reasoning (``<details>``,
    ``<think>``) and Lucy's own evidence notes are taken out of its text."""
    out = []
    for message in messages:
        role = str(message.get("role", ""))
        if role not in ("user", "assistant"):
            continue
        text = clean_text(message_text(message.get("content")))
        if role == "assistant":
            text = _NOTES.sub("", _REASONING.sub("", text))
        out.append(Turn(role, text.strip()))
    return out


def read(messages: Sequence[Mapping[str, Any]], *, max_chars: int) -> Reading:
    """What the last user message asks. Raises ValueError when the conversation has no user message."""
    said = turns(messages)
    last = next((i for i in range(len(said) - 1, -1, -1) if said[i].role == "user"), None)
    if last is None:
        raise ValueError("the conversation has no user message: the last user message is the question")
    text, earlier = said[last].text, said[:last]
    task = task_of(text)
    if task is not None:
        name, key, why = task
        quoted = quoted_history(text)
        return Reading(Kind.TASK, text, why, task=name, json_key=key, history=tuple(quoted or earlier))
    chat = small_talk_of(text)
    if chat is not None:
        return Reading(Kind.SMALL_TALK, text, f"small talk ({chat}): only greeting, thanks, farewell or "
                                              "acknowledgement words", small_talk=chat, history=tuple(earlier))
    question, why = with_context(text, earlier, max_chars=max_chars)
    return Reading(Kind.QUESTION, text, why, question=question, history=tuple(earlier))


# ------------------------------------------------------------------------------------------------ tasks

# Open WebUI's task prompts (backend/open_webui/config.py, DEFAULT_*_PROMPT_TEMPLATE) start with "### Task:" and
# quote the chat in <chat_history>; their "JSON format: { "<key>": ... }" line says which task it is.
_TASK_HEADING = re.compile(r"^\s*#{2,4}\s*task\s*:", re.IGNORECASE)
_CHAT_HISTORY = re.compile(r"<chat_history>(.*?)(?:</chat_history>|$)", re.DOTALL | re.IGNORECASE)
_JSON_KEY = re.compile(r"\{\s*\"(title|tags|follow_ups|queries|text|prompt)\"\s*:")
_KEY_TASKS = {"title": "title", "tags": "tags", "follow_ups": "follow_ups", "queries": "queries",
              "text": "autocomplete", "prompt": "image_prompt"}
_WORD_TASKS = (("title", re.compile(r"\btitle\b", re.IGNORECASE)), ("tags", re.compile(r"\btags?\b", re.IGNORECASE)),
               ("follow_ups", re.compile(r"\bfollow[- ]?ups?\b", re.IGNORECASE)))
_EMOJI_TASK = re.compile(r"^\s*your task is to reflect the speaker's likely facial expression", re.IGNORECASE)
# Other front-ends' title prompts ("Create a concise, 3-5 word phrase as a title for the previous query", "Generate a
# short title for this conversation"): a verb asking for a title, and the chat it is for.
_TITLE_REQUEST = re.compile(
    r"\b(generate|create|write|give|suggest|provide|make)\b[^.\n]{0,80}\btitle\b[^\n]{0,80}"
    r"\b(conversation|chat|dialogue|query|queries|messages?)\b", re.IGNORECASE)
_ROLE_LINE = re.compile(r"^\s*(USER|ASSISTANT|SYSTEM)\s*:\s?(.*)$", re.IGNORECASE)


def task_of(text: str) -> tuple[str, str | None, str] | None:
    """``(task, JSON key or None, why)`` when ``text`` is a front-end's task prompt, else None."""
    if _EMOJI_TASK.match(text):
        return "emoji", None, "the emoji prompt of a chat front-end"
    heading, quoted = bool(_TASK_HEADING.match(text)), bool(_CHAT_HISTORY.search(text))
    if heading or quoted:
        form = "a '### Task:' heading" if heading else "a <chat_history> block"
        key_match = _JSON_KEY.search(text)
        if key_match is not None:
            key = key_match.group(1)
            return _KEY_TASKS[key], key, f"a task prompt ({form}) asking for JSON with \"{key}\""
        instructions = _CHAT_HISTORY.sub("", text)
        for name, words in _WORD_TASKS:
            if words.search(instructions):
                return name, None, f"a task prompt ({form}) asking for a {name.replace('_', '-')}"
        return "other", None, f"a task prompt ({form})"
    if _TITLE_REQUEST.search(text):
        return "title", ("title" if "json" in text.lower() else None), "a request for a title of the conversation"
    return None


def quoted_history(text: str) -> list[Turn]:
    """The turns a task prompt quotes in ``<chat_history>`` (``USER: ...`` / ``ASSISTANT: ...`` lines; a turn goes
    on over the lines that follow it)."""
    block = _CHAT_HISTORY.search(text)
    if block is None:
        return []
    out: list[Turn] = []
    for line in block.group(1).splitlines():
        role = _ROLE_LINE.match(line)
        if role is not None:
            out.append(Turn(role.group(1).lower(), role.group(2)))
        elif out and line.strip():
            out[-1] = Turn(out[-1].role, f"{out[-1].text}\n{line}")
    return [Turn(t.role, t.text.strip()) for t in out if t.role in ("user", "assistant")]


# ------------------------------------------------------------------------------------------------ small talk

_SMALL_TALK = {
    "greeting": ["hi", "hello", "hey", "heya", "hiya", "howdy", "yo", "greetings", "good morning", "good afternoon",
                 "good evening", "good day", "morning", "evening", "hi there", "hello there", "hey there"],
    "thanks": ["thanks", "thank you", "thx", "ty", "cheers", "many thanks", "thanks a lot", "much appreciated",
               "appreciated", "thank you very much", "thanks so much", "thank you so much", "great thanks"],
    "farewell": ["bye", "goodbye", "good bye", "bye bye", "see you", "see ya", "later", "good night", "that's all",
                 "that is all"],
    "ack": ["ok", "okay", "k", "kk", "cool", "great", "nice", "perfect", "awesome", "got it", "i see", "alright",
            "all right", "sure", "understood", "fine", "good", "excellent", "wow", "yes", "no", "yep", "nope",
            "makes sense", "sounds good", "good job", "well done"],
    "about": ["help", "who are you", "what are you", "what can you do", "what do you do", "how does this work",
              "how do you work", "how are you", "how are you doing", "are you there", "what is lucy", "who is lucy"],
}
_FILLER = frozenset({"lucy", "there", "so", "much", "very", "a", "lot", "again", "all", "everyone", "folks", "guys",
                     "mate", "please", "oh", "ah", "and", "then", "for", "that", "it", "this"})
_PHRASES = sorted(((tuple(p.split()), kind) for kind, ps in _SMALL_TALK.items() for p in ps),
                  key=lambda pk: -len(pk[0]))
_SMALL_WORDS = re.compile(r"[a-z']+")
MAX_SMALL_TALK_WORDS = 8


def small_talk_of(text: str) -> str | None:
    """Which kind of small talk ``text`` is (the kind of its first phrase), or None when it holds anything but
    small-talk phrases and filler words ("hi, did a van stop?" is a question)."""
    words = _SMALL_WORDS.findall(text.lower().replace("’", "'"))
    if not words or len(words) > MAX_SMALL_TALK_WORDS or any(c.isdigit() for c in text):
        return None
    found: list[str] = []
    i = 0
    while i < len(words):
        for phrase, kind in _PHRASES:
            if tuple(words[i:i + len(phrase)]) == phrase:
                found.append(kind)
                i += len(phrase)
                break
        else:
            if words[i] not in _FILLER:
                return None
            i += 1
    return found[0] if found else None


# ------------------------------------------------------------------------------------------------ follow-ups

# A question leans on the turns before it when it points back at them ("it", "they", "the same", "else", or "that",
# "then" at its end), opens as a continuation ("and ...", "what about ...") or is a short one that names almost
# nothing itself ("What colour?").
_POINTERS = frozenset({"it", "its", "it's", "itself", "they", "them", "their", "theirs", "he", "him", "his", "she",
                       "her", "hers", "those", "these", "same", "else", "another", "again", "also", "too", "former",
                       "latter", "one", "ones"})
_CONTINUES = re.compile(r"^\s*(and|but|also|so|then|what about|how about|what else|anything else|same)\b",
                        re.IGNORECASE)
_POINTS_AT_END = re.compile(r"\b(that|this|there|then|those|these)\s*[?.!]*\s*$", re.IGNORECASE)
_WORDS = re.compile(r"[a-z0-9']+")
MAX_CONTEXT_QUESTIONS = 3
_ANSWER_CHARS = 240


def leans_on_earlier(text: str) -> str | None:
    """Why ``text`` needs the turns before it to be understood (None when it stands on its own)."""
    words = _WORDS.findall(text.lower().replace("’", "'"))
    pointers = [w for w in words if w in _POINTERS]
    if pointers:
        return f"it refers back ({pointers[0]!r})"
    end = _POINTS_AT_END.search(text)
    if end is not None:
        return f"it ends pointing back ({end.group(1).lower()!r})"
    if _CONTINUES.match(text):
        return "it continues the previous question"
    if len(words) < 4 and len([w for w in words if w not in STOPWORDS]) < 2:
        return "it names too little on its own"
    return None


def with_context(text: str, earlier: Sequence[Turn], *, max_chars: int) -> tuple[str, str]:
    """``(question for the engine, why)``: ``text`` itself, or, when it leans on earlier questions, ``text`` followed
    by those questions and their answers (the most recent first, up to :data:`MAX_CONTEXT_QUESTIONS` going back
    while each leans on the one before), kept within ``max_chars``."""
    reason = leans_on_earlier(text)
    exchanges = _earlier_questions(earlier)
    if reason is None or not exchanges:
        return text, "a question" + ("" if reason is None else f" ({reason}, but nothing was asked before)")
    chain = [exchanges[0]]
    while len(chain) < MAX_CONTEXT_QUESTIONS and len(exchanges) > len(chain) and leans_on_earlier(chain[-1][0]):
        chain.append(exchanges[len(chain)])
    for answer_chars in (_ANSWER_CHARS, 80, 0):
        for n in range(len(chain), 0, -1):
            question = text + _context(chain[:n], answer_chars)
            if len(question) <= max_chars:
                return question, f"a follow-up question ({reason}): sent with {n} earlier question(s)"
    return text, f"a follow-up question ({reason}), but too long to carry earlier questions"


def _earlier_questions(earlier: Sequence[Turn]) -> list[tuple[str, str]]:
    """``(question, answer)`` of the earlier user turns that were questions, the most recent first."""
    out = []
    for i, turn in enumerate(earlier):
        if turn.role != "user" or not turn.text or task_of(turn.text) or small_talk_of(turn.text):
            continue
        answer = next((t.text for t in earlier[i + 1:i + 2] if t.role == "assistant"), "")
        out.append((turn.text, answer))
    return out[::-1]


def _context(chain: Sequence[tuple[str, str]], answer_chars: int) -> str:
    # No double quotes: the lexical reasoner reads quoted words as names to look for.
    parts = []
    for question, answer in chain:
        part = f"earlier question: {_one_line(question)}"
        if answer and answer_chars:
            part += f" Answer given: {_clip(_one_line(answer), answer_chars)}"
        parts.append(part)
    return FOLLOW_UP_OPENING + "; ".join(parts) + ")"


def _one_line(text: str) -> str:
    return " ".join(text.replace('"', "'").replace("“", "'").replace("”", "'").split())


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


# ------------------------------------------------------------------------------------------------ replies


@dataclass(frozen=True, slots=True)
class MemoryGlance:
    """What a stream's memory holds, for replies that are not answers: media seconds captioned, coarse memories,
    and the latest one (its span and text)."""

    stream: str
    captioned_seconds: float = 0.0
    coarse_memories: int = 0
    latest: tuple[float, float, str] | None = None


def clock(seconds: float) -> str:
    """Media seconds as ``m:ss`` (``h:mm:ss`` past an hour)."""
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def small_talk_reply(kind: str, glance: MemoryGlance) -> str:
    """The reply to small talk: for a greeting or a question about Lucy, what memory holds now."""
    name = glance.stream
    if kind == "thanks":
        return f"You're welcome. Ask me anything else about what {name} saw."
    if kind == "farewell":
        return f"Bye! I keep watching {name}; ask me again any time."
    if kind == "ack":
        return f"Ask me anything else about what {name} saw."
    opener = "Hello!" if kind == "greeting" else "I am Lucy, a memory of a video stream."
    if glance.coarse_memories == 0:
        held = f"I am watching {name}, but nothing of it is in my memory yet."
    else:
        held = (f"I am watching {name} and remember {clock(glance.captioned_seconds)} of it so far "
                f"({glance.coarse_memories} coarse memories).")
        if glance.latest is not None:
            start, end, text = glance.latest
            held += f" The latest, {clock(start)}-{clock(end)}: {_clip(_one_line(text), 200)}"
    return (f"{opener} {held}\nAsk me about anything it saw, e.g. \"What happened in the last minute?\" or "
            "\"When did someone come to the door?\"")


def task_reply(reading: Reading, glance: MemoryGlance) -> str:
    """The reply to a front-end task, in the format its prompt asks for, made from the conversation it quotes."""
    first = next((t.text for t in reading.history if t.role == "user" and t.text and not task_of(t.text)), "")
    last = next((t.text for t in reversed(reading.history) if t.role == "user" and t.text and not task_of(t.text)),
                "")
    topic = topic_words(first)
    value: Any
    if reading.task == "title":
        value = f"📹 {glance.stream}: {' '.join(w.capitalize() for w in topic[:4])}" if topic else \
            f"📹 {glance.stream} camera chat"
    elif reading.task == "tags":
        value = ["Video", glance.stream] + [w.capitalize() for w in topic_words(last)[:2]]
    elif reading.task == "follow_ups":
        value = follow_ups(glance.stream, asked=bool(last))
    elif reading.task == "emoji":
        return "🙂"
    elif reading.task == "queries":
        value = []  # nothing to search the web for: the answers are in the stream's memory
    else:
        value = ""
    if reading.json_key is None:
        return "\n".join(value) if isinstance(value, list) else str(value)
    return json.dumps({reading.json_key: value}, ensure_ascii=False)


def topic_words(text: str) -> list[str]:
    """The words of ``text`` that say what it is about (no stop words, each once, in order)."""
    seen: list[str] = []
    for word in _WORDS.findall(text.lower()):
        if word not in STOPWORDS and word not in seen and not word.isdigit() and "'" not in word:
            seen.append(word)
    return seen


def follow_ups(stream: str, *, asked: bool) -> list[str]:
    """Questions to suggest next: about the moment just discussed when something was asked, else about the stream."""
    if asked:
        return ["What happened just before that?", "What happened just after that?", "What else happened around then?"]
    return [f"What happened on {stream} in the last minute?", f"Summarise what {stream} has seen so far.",
            f"Did anyone come by on {stream}?"]
