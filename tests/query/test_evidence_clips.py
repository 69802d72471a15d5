"""Every answer's evidence span and every alert carry the URL of their clip (GET /v1/streams/{s}/clip)."""

from __future__ import annotations

from lucy.memory.watches import Alert
from lucy.query.trace import Evidence, QueryResult
from lucy.service.schemas import AnswerOut
from lucy.watch.delivery import alert_json


def result(stream: str, evidence: list[Evidence]) -> QueryResult:
    return QueryResult(question_id=1, stream=stream, question="who rang the bell?", options=[], answer="a courier",
                       option_index=None, confident=True, evidence=evidence, reason="seen", iterations=1,
                       horizon=300.0, wall_seconds=0.5)


def test_answers_name_the_clip_of_each_evidence_span():
    body = result("door", [Evidence(60.0, 75.25), Evidence(90.0, 90.0)]).to_json()
    assert [e["clip_url"] for e in body["evidence"]] == [
        "/v1/streams/door/clip?from=60&to=75.25",
        "/v1/streams/door/clip?from=90&to=91",  # an instant is widened to a second
    ]
    # The API's answer schema keeps it.
    assert AnswerOut.model_validate(body).evidence[0].clip_url == "/v1/streams/door/clip?from=60&to=75.25"


def test_across_streams_each_span_links_to_its_own_stream():
    body = result("_all", [Evidence(5.0, 9.0, stream="yard"), Evidence(12.5, 20.0, stream="door")]).to_json()
    assert [e["clip_url"] for e in body["evidence"]] == ["/v1/streams/yard/clip?from=5&to=9",
                                                         "/v1/streams/door/clip?from=12.5&to=20"]


def test_alerts_name_the_clip_of_their_evidence():
    alert = Alert(id=3, watch_id=1, stream="gate", question="is the gate open?", start=120.0, end=131.5,
                  reason="open", frame_time=125.75, level="coarse", created=0.0, event_end=180.0)
    body = alert_json(alert)
    assert body["clip_url"] == "/v1/streams/gate/clip?from=120&to=131.5"
    assert body["frame_url"] == "/v1/streams/gate/frames?t=125.750"


def test_the_chat_reply_names_each_clip_and_its_note_is_taken_out_of_history():
    from lucy.service.chat import answer_text
    from lucy.service.conversation import turns

    text = answer_text(result("door", [Evidence(60.0, 75.0)]).to_json())
    assert text == "a courier\n\nEvidence: 60.0-75.0 s (/v1/streams/door/clip?from=60&to=75)."
    [turn] = turns([{"role": "assistant", "content": text}])
    assert turn.text == "a courier"  # a later turn's history does not carry it
