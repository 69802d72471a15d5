"""The ``openai`` reasoner: any OpenAI-compatible chat model (DeepSeek-R1, Qwen, ... on vLLM or a hosted API).

Each agent's reply schema is a pydantic model used twice: as the ``response_format`` JSON schema sent to the
server (where it supports structured output) and as the validator of what comes back. Replies from servers or
models that ignore the schema are still parsed: ``<think>`` blocks are dropped, code fences opened, and the JSON
object found among the text around it. A reply that does not validate goes back to the model once with the
error; a second failure raises :class:`ReasonerError` with a clear message.

The answering agent is shown, besides memory, the question's kind as the engine's rules parsed it and a table of
what the detector, OCR and transcription recorded in the question's period (the question's brief, inside the data
block), and it is asked for a direct answer sentence rather than a memory line. Its confidence is one of several
checks, all of which must hold: the reply must validate and name an option that exists (else it goes back once); a
confident reply must cite evidence that meets a memory or a table row it was shown (:func:`grounded`, else it is
kept, not confident, and the loop looks further); the engine never takes a final answer as confident.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from lucy.openai_endpoint import OpenAIEndpoint
from lucy.query import prompts
from lucy.query.reasoners.base import (
    AnswerReply,
    CheckReply,
    LocaliseReply,
    MemoryItem,
    Question,
    Reasoned,
    Reasoner,
    ReasonerError,
    SelectReply,
    SummaryReply,
    Usage,
    check_answer,
    check_evidence,
    check_localise,
    check_select,
)
from lucy.text import clip_text

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
StructuredOutput = Literal["auto", "json_schema", "json_object", "off"]


# ------------------------------------------------------------------------------------------------- extraction


def strip_thinking(text: str) -> str:
    """Drop reasoning models' ``<think>…</think>`` blocks (and a dangling one either side)."""
    text = _THINK.sub("", text)
    lower = text.lower()
    if "</think>" in lower:  # some servers strip the opening tag: everything before the close is thinking
        text = text[lower.rindex("</think>") + len("</think>"):]
    elif "<think>" in lower:  # cut off while still thinking: nothing after it is an answer
        text = text[: lower.index("<think>")]
    return text


def _balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` in ``text``, braces inside JSON strings ignored."""
    found: list[str] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start:i + 1])
    return found


def json_candidates(text: str) -> list[str]:
    """JSON object texts found in a model reply, most likely first (fenced ones, then the last object)."""
    body = strip_thinking(text).strip()
    out: list[str] = []
    for fenced in _FENCE.findall(body):
        out += list(reversed(_balanced_objects(fenced)))
    out += list(reversed(_balanced_objects(body)))
    seen: set[str] = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def parse_reply(text: str, model: type[M], check: Callable[[M], M] | None = None) -> M:
    """The first JSON object in ``text`` that validates as ``model`` (and passes ``check``).

    Raises ValueError with a message meant for the model (it is shown the error once and asked again).
    """
    candidates = json_candidates(text)
    if not candidates:
        raise ValueError("the reply holds no JSON object")
    first_error: str | None = None
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as err:
            first_error = first_error or f"invalid JSON ({err.msg} at position {err.pos})"
            continue
        if not isinstance(data, dict):
            continue
        try:
            value = model.model_validate(data)
            return check(value) if check else value
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in err.errors())
            first_error = first_error or f"the JSON does not fit the schema: {problems}"
        except ValueError as err:
            first_error = first_error or str(err)
    raise ValueError(first_error or "the reply holds no JSON object")


# ------------------------------------------------------------------------------------------------- confidence

GROUNDING_SLACK_SECONDS = 1.0  # evidence this close to a span shown still points at it (rounded times)


def _plain(text: str) -> str:
    return " ".join(text.lower().strip(" .!").split())


def shown_spans(memory: Sequence[MemoryItem], question: Question) -> list[tuple[float, float]]:
    """The media-time spans of what an answer prompt showed: each memory, and each row of the observation table
    (a class's or a track's first to last sighting, the time of a text or speech line)."""
    spans = [(m.start, m.end) for m in memory]
    table = question.brief.table if question.brief is not None else None
    if table is not None:
        spans += [(c.first_seen, c.last_seen) for c in table.classes]
        spans += [(r.first_seen, r.last_seen) for r in table.tracks]
        spans += [(s.start, s.end) for s in (*table.texts, *table.speech)]
        if table.coverage is not None and not table.classes:  # "none seen" rests on all the detector watched
            spans.append((table.start, table.end))
    return spans


def grounded(reply: AnswerReply, memory: Sequence[MemoryItem], question: Question) -> bool:
    """Whether a reply's evidence points at what it was shown: at least one span that meets a memory or a row of
    the observation table. A confident reply with no evidence, or evidence only elsewhere, is not grounded."""
    spans = shown_spans(memory, question)
    slack = GROUNDING_SLACK_SECONDS
    return any(e.start <= b + slack and e.end >= a - slack for e in reply.evidence for a, b in spans)


# ------------------------------------------------------------------------------------------------- reasoner


class OpenAIReasoner(Reasoner):
    """The agents on a chat-completions endpoint, shared by all questions of a process (a client per event loop it
    is used on). Errors name the server without its credentials."""

    name = "openai"
    reads_observations = True  # the answer prompt shows the question's kind and the table of what was observed
    interprets = True  # a chat model writes its own answer from the captions (a "why" included)

    def __init__(self, *, base_url: str, model: str, api_key: str = "EMPTY", timeout_seconds: float = 120.0,
                 max_retries: int = 2, max_tokens: int = 1024, temperature: float = 0.0,
                 structured_output: StructuredOutput = "auto") -> None:
        self.model = model
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.structured_output: StructuredOutput = structured_output
        self.endpoint = OpenAIEndpoint(base_url, api_key, timeout_seconds=timeout_seconds, max_retries=max_retries)
        self._where = self.endpoint.where

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any] | None:
        if self.structured_output in ("auto", "json_schema"):
            return {"type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}}
        if self.structured_output == "json_object":
            return {"type": "json_object"}
        return None

    async def _complete(self, messages: list[dict[str, str]], schema: type[BaseModel],
                        usage: Usage) -> str:
        fmt = self._response_format(schema)
        request: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                                   "temperature": self.temperature}
        if fmt is not None:
            request["response_format"] = fmt
        started = time.perf_counter()
        client = self.endpoint.client()
        try:
            try:
                response = await client.chat.completions.create(**request)
            except openai.BadRequestError as err:
                if self.structured_output != "auto" or fmt is None:
                    raise
                # This server does not take the schema: parse free text from now on.
                log.info("reasoner %s refused response_format (%s); parsing free text from now on",
                         self._where, self.endpoint.scrub(str(err.message)))
                self.structured_output = "off"
                request.pop("response_format", None)
                usage.llm_calls += 1
                response = await client.chat.completions.create(**request)
        except openai.APIStatusError as err:
            raise ReasonerError(f"reasoner {self.model} at {self._where} answered HTTP {err.status_code}: "
                                f"{clip_text(self.endpoint.scrub(str(err.message)), 300)}") from None
        except openai.APITimeoutError:
            raise ReasonerError(f"reasoner {self.model} at {self._where} timed out") from None
        except openai.APIConnectionError as err:
            raise ReasonerError(f"reasoner {self.model} at {self._where} cannot be reached: "
                                f"{self.endpoint.scrub(str(err))}") from None
        except openai.APIError as err:  # e.g. a body that is not a chat completion
            raise ReasonerError(f"reasoner {self.model} at {self._where} sent an unusable reply: "
                                f"{clip_text(self.endpoint.scrub(str(err)), 300)}") from None
        finally:
            usage.latency_seconds += time.perf_counter() - started
        if getattr(response, "usage", None) is not None:
            usage.prompt_tokens += int(response.usage.prompt_tokens or 0)
            usage.completion_tokens += int(response.usage.completion_tokens or 0)
        choices = getattr(response, "choices", None) or []
        if not choices or choices[0].message is None:
            return ""
        message = choices[0].message
        return message.content or ""

    async def _ask(self, prompt: prompts.Prompt, schema: type[M], check: Callable[[M], M] | None,
                   agent: str) -> Reasoned[M]:
        usage = Usage(llm_calls=1)
        messages = prompt.messages()
        text = await self._complete(messages, schema, usage)
        try:
            return Reasoned(parse_reply(text, schema, check), usage)
        except ValueError as err:
            error = str(err)
        # Once more, with the error shown (the prompt was packed leaving room for this).
        log.info("reasoner %s: %s reply did not validate (%s); asking again", self.model, agent, error)
        shown = clip_text(text, prompts.RETRY_REPLY_CHARS) or "(empty)"
        messages = [*messages, {"role": "assistant", "content": shown},
                    {"role": "user", "content": f"That reply cannot be used: {clip_text(error, 400)}. Reply again "
                                                f"with only the JSON object, in the form given above."}]
        usage.llm_calls += 1
        text = await self._complete(messages, schema, usage)
        try:
            return Reasoned(parse_reply(text, schema, check), usage)
        except ValueError as err:
            raise ReasonerError(f"the {agent} agent ({self.model}) gave no valid reply after one retry: "
                                f"{clip_text(str(err), 300)}; reply began: "
                                f"{clip_text(' '.join(text.split()), 120)!r}") from None

    # ------------------------------------------------------------------------------------------- agents

    async def answer(self, question: Question, memory: Sequence[MemoryItem], *,
                     final: bool = False) -> Reasoned[AnswerReply]:
        reasoned = await self._ask(prompts.answer_prompt(question, memory, final=final), AnswerReply,
                                   lambda r: check_answer(r, question), "answer")
        reply = reasoned.reply
        if not question.options and reply.option_index is not None:
            reply = reply.model_copy(update={"option_index": None})
        if question.options:  # the option's own text, whatever words the model used; its sentence leads the reason
            index = reply.option_index
            assert index is not None
            option, sentence = question.options[index], " ".join(reply.answer.split())
            reason = reply.reason
            if sentence and _plain(sentence) != _plain(option):
                reason = f"{sentence} {reason}".strip()
            reply = reply.model_copy(update={"answer": option, "reason": reason})
        if reply.confident and not grounded(reply, memory, question):
            # The model's word alone does not make an answer confident: it must point at what it was shown.
            reply = reply.model_copy(update={
                "confident": False,
                "reason": f"{reply.reason} (said to be confident, but its evidence is not in the memory or "
                          f"observations shown)".strip()})
        reasoned.reply = reply
        return reasoned

    async def localise(self, question: Question, memory: Sequence[MemoryItem],
                       candidates: Sequence[MemoryItem]) -> Reasoned[LocaliseReply]:
        refs = [c.ref for c in candidates]
        return await self._ask(prompts.localise_prompt(question, memory, candidates), LocaliseReply,
                               lambda r: check_localise(r, refs), "localise")

    async def select(self, question: Question, spans: Sequence[MemoryItem], k: int) -> Reasoned[SelectReply]:
        refs = [s.ref for s in spans]
        return await self._ask(prompts.select_prompt(question, spans, k), SelectReply,
                               lambda r: check_select(r, refs), "select")

    async def summarise(self, items: Sequence[MemoryItem], *, max_chars: int) -> Reasoned[SummaryReply]:
        reasoned = await self._ask(prompts.summarise_prompt(items, max_chars), SummaryReply, None, "summarise")
        reasoned.reply = reasoned.reply.model_copy(update={"summary": clip_text(reasoned.reply.summary, max_chars)})
        return reasoned

    async def check(self, watch_question: str, memory: Sequence[MemoryItem]) -> Reasoned[CheckReply]:
        return await self._ask(prompts.check_prompt(watch_question, memory), CheckReply,
                               lambda r: check_evidence(r, memory), "check")
