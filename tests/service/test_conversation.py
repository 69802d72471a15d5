"""How a chat conversation is read (:mod:`lucy.service.conversation`): a chat front-end's own tasks, small talk and
questions, and the context a follow-up question carries. Pure functions: no server."""

from __future__ import annotations

import json

import pytest

from lucy.service.conversation import (
    Kind,
    MemoryGlance,
    Turn,
    leans_on_earlier,
    quoted_history,
    read,
    small_talk_of,
    task_of,
    task_reply,
    with_context,
)

HISTORY = ("USER: Which platform does the train depart from?\n"
           "ASSISTANT: PLATFORM 7 DEPARTS 14:05\n\nEvidence: 70.0-95.0 s.")


def open_webui(task: str, history: str = HISTORY) -> str:
    """The shape of Open WebUI's task prompts (backend/open_webui/config.py, DEFAULT_*_PROMPT_TEMPLATE, with
    {{MESSAGES:END:n}} rendered as its get_messages_content does: one ``ROLE: content`` line per message)."""
    prompts = {
        "title": "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n"
                 "### Guidelines:\n- The title should clearly represent the main theme or subject of the "
                 "conversation.\n### Output:\nJSON format: { \"title\": \"your concise title here\" }\n"
                 "### Examples:\n- { \"title\": \"📉 Stock Market Trends\" },",
        "tags": "### Task:\nGenerate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 "
                "more specific subtopic tags.\n\n### Output:\n"
                "JSON format: { \"tags\": [\"tag1\", \"tag2\", \"tag3\"] }",
        "follow_ups": "### Task:\nSuggest 3-5 relevant follow-up questions or prompts that the user might naturally "
                      "ask next in this conversation as a **user**, based on the chat history.\n### Output:\n"
                      "JSON format: { \"follow_ups\": [\"Question 1?\", \"Question 2?\", \"Question 3?\"] }",
        "queries": "### Task:\nAnalyze the chat history to determine the necessity of generating search queries, in "
                   "the given language.\n### Output:\nStrictly return in JSON format: \n{\n  \"queries\": "
                   "[\"query1\", \"query2\"]\n}",
        "autocomplete": "### Task:\nYou are an autocompletion system. Continue the text in `<text>`.\n"
                        "### **Output Rules**:\n- Respond only in JSON format: `{ \"text\": \"<your_completion>\" }`.",
        "old_title": "Create a concise, 3-5 word title with an emoji as a title for the chat history, in the given "
                     "language. RESPOND ONLY WITH THE TITLE TEXT.",
    }
    return f"{prompts[task]}\n### Chat History:\n<chat_history>\n{history}\n</chat_history>"


@pytest.mark.parametrize(("task", "name", "key"), [
    ("title", "title", "title"), ("tags", "tags", "tags"), ("follow_ups", "follow_ups", "follow_ups"),
    ("queries", "queries", "queries"), ("autocomplete", "autocomplete", "text"), ("old_title", "title", None)])
def test_open_webui_task_prompts_are_tasks(task: str, name: str, key: str | None) -> None:
    found = task_of(open_webui(task))
    assert found is not None and found[:2] == (name, key), found
    reading = read([{"role": "user", "content": open_webui(task)}], max_chars=500)
    assert reading.kind is Kind.TASK and reading.task == name
    assert [t.role for t in reading.history] == ["user", "assistant"]
    assert reading.history[0].text == "Which platform does the train depart from?"


def test_other_task_prompts() -> None:
    emoji = ("Your task is to reflect the speaker's likely facial expression through a fitting emoji.\n\n"
             "Message: ```hi```")
    assert task_of(emoji)[0] == "emoji"  # type: ignore[index]
    page_assist = ("Here is the query:\n\n--------------\n\nDid a van stop?\n\n--------------\n\nCreate a concise, "
                   "3-5 word phrase as a title for the previous query. RESPOND ONLY WITH THE TITLE TEXT.")
    assert task_of(page_assist) == ("title", None, "a request for a title of the conversation")
    assert task_of("Generate a short title for this conversation, as JSON") == \
        ("title", "title", "a request for a title of the conversation")


@pytest.mark.parametrize("question", [
    "Which platform does the train depart from?", "Did a van stop at the door?", "What is the title on the poster?",
    "hi, did a van stop?", "Thanks! And what colour was it?", "What tags were on the boxes?", "Who is at the gate?",
    "How many people came in?", "What happened?", "ok so who rang the bell", "What time is shown on the clock?",
    "Give me a title card text seen at 10 s"])
def test_questions_are_questions(question: str) -> None:
    assert task_of(question) is None
    assert small_talk_of(question) is None
    assert read([{"role": "user", "content": question}], max_chars=500).kind is Kind.QUESTION


@pytest.mark.parametrize(("text", "kind"), [
    ("hi", "greeting"), ("Hello there!", "greeting"), ("hey Lucy 👋", "greeting"), ("Good morning", "greeting"),
    ("thanks", "thanks"), ("Thank you so much!", "thanks"), ("thx", "thanks"), ("ok, bye", "ack"),
    ("Goodbye.", "farewell"), ("who are you?", "about"), ("What can you do?", "about"), ("help", "about"),
    ("Got it, thanks", "ack"), ("cool", "ack")])
def test_small_talk(text: str, kind: str) -> None:
    assert small_talk_of(text) == kind
    reading = read([{"role": "user", "content": text}], max_chars=500)
    assert reading.kind is Kind.SMALL_TALK and reading.small_talk == kind


def test_the_last_user_message_is_what_is_asked() -> None:
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "text", "text": "Did a van stop at the door?"}]}]
    reading = read(messages, max_chars=500)
    assert reading.kind is Kind.QUESTION and reading.question == "Did a van stop at the door?"
    with pytest.raises(ValueError, match="no user message"):
        read([{"role": "system", "content": "x"}], max_chars=500)


@pytest.mark.parametrize(("text", "leans"), [
    ("What colour was it?", True), ("And at the back gate?", True), ("What about the driver?", True),
    ("Which colour?", True), ("What happened just before that?", True), ("Did they come back?", True),
    ("Did a van stop at the door?", False), ("Where is the train?", False),
    ("What time does platform 7 depart?", False), ("Is there a dog in the yard?", False)])
def test_follow_ups_are_recognised(text: str, leans: bool) -> None:
    assert (leans_on_earlier(text) is not None) == leans


def test_a_follow_up_carries_the_earlier_question_and_answer() -> None:
    earlier = [Turn("user", "hi"), Turn("assistant", "Hello!"), Turn("user", "Did a van stop at the door?"),
               Turn("assistant", "Yes: a white van stopped at 1:20."), Turn("user", "Was it a delivery?"),
               Turn("assistant", "Yes, a parcel.")]
    question, why = with_context("What colour was it?", earlier, max_chars=2000)
    assert question.startswith("What colour was it? (a follow-up; ")
    # The chain goes back while each question leans on the one before: "Was it a delivery?" needs the van.
    assert "Was it a delivery?" in question and "Did a van stop at the door?" in question
    assert "a white van" in question and "hi" not in question.split("(")[1].split()
    assert "2 earlier question(s)" in why
    # Within the question limit: answers are clipped, then older questions dropped.
    short, _ = with_context("What colour was it?", earlier, max_chars=90)
    assert len(short) <= 90 and "Was it a delivery?" in short
    alone, why = with_context("Did the driver wave?", earlier, max_chars=2000)
    assert alone == "Did the driver wave?" and why == "a question"
    first, _ = with_context("What colour was it?", [], max_chars=2000)
    assert first == "What colour was it?"


def test_task_replies_follow_the_prompt_format() -> None:
    glance = MemoryGlance("porch", 150.0, 3, (120.0, 150.0, "a green scene"))

    def reply(task: str) -> str:
        return task_reply(read([{"role": "user", "content": open_webui(task)}], max_chars=500), glance)

    title = json.loads(reply("title"))["title"]
    assert "porch" in title and "Platform" in title and "Train" in title
    tags = json.loads(reply("tags"))["tags"]
    assert tags[:2] == ["Video", "porch"] and all(isinstance(t, str) for t in tags)
    follow_ups = json.loads(reply("follow_ups"))["follow_ups"]
    assert len(follow_ups) >= 3 and all(q.endswith("?") for q in follow_ups)
    # Each suggestion, once sent, is a question about the moment just discussed.
    assert all(leans_on_earlier(q) for q in follow_ups[:2])
    assert json.loads(reply("queries")) == {"queries": []}
    assert json.loads(reply("autocomplete")) == {"text": ""}
    plain = reply("old_title")
    assert plain.startswith("📹 porch: ") and "{" not in plain


def test_quoted_history_keeps_multiline_turns() -> None:
    text = "### Task:\nx\n<chat_history>\nUSER: first line\nsecond line\nASSISTANT: reply\n</chat_history>"
    assert quoted_history(text) == [Turn("user", "first line\nsecond line"), Turn("assistant", "reply")]
