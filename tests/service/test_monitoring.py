"""Monitoring: the alert rules under promtool (check and unit tests), the Grafana dashboard, and what a real
server's /metrics serves (build info, process metrics, the MQTT link, names the deploy files rely on)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lucy import __version__
from tests.service.conftest import LucyServer, Mosquitto, wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES, RULE_TESTS, DASHBOARD = (DEPLOY / "lucy-alerts.yml", DEPLOY / "lucy-alerts.test.yml",
                                DEPLOY / "grafana-dashboard.json")
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


def _promtool(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    if not os.access(promtool, os.X_OK):
        pytest.fail("promtool is missing: install Debian's prometheus package (scripts/setup.sh does)")
    return subprocess.run([promtool, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120,
                          check=False)


def _passes(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{' '.join(done.args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


# ------------------------------------------------------------------------------------------------ alert rules


def test_alert_rules_pass_promtool_check_and_unit_tests() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"]
    count = sum(len(g["rules"]) for g in rules)
    assert f"SUCCESS: {count} rules found" in _passes(_promtool("check", "rules", str(RULES)))
    assert "SUCCESS" in _passes(_promtool("test", "rules", RULE_TESTS.name, cwd=DEPLOY))


def test_every_rule_is_unit_tested_both_ways() -> None:
    """Each alert has a case where it fires and one where it must not; each recording rule has its samples
    checked; each alert has a severity and a summary."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    alerts = {r["alert"] for r in rules if "alert" in r}
    records = {r["record"] for r in rules if "record" in r}
    assert {"LucyDown", "LucyCaptionerFailing", "LucyMqttDisconnected"} <= alerts
    assert "stream:lucy_questions_confident_per_answered:ratio_rate1h" in records
    for rule in rules:
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"], rule
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    checks = [c for t in cases for c in t.get("alert_rule_test", [])]
    assert alerts <= {c["alertname"] for c in checks if c["exp_alerts"]}, "alerts never seen firing"
    assert alerts <= {c["alertname"] for c in checks if not c["exp_alerts"]}, "alerts never seen silent"
    assert records <= {c["expr"] for t in cases for c in t.get("promql_expr_test", [])}
    # The old captioner rule (requests == failures) is gone: a ratio over a threshold, guarded against no traffic.
    failing = next(r for r in rules if r.get("alert") == "LucyCaptionerFailing")["expr"]
    assert "==" not in failing and "> 0.5" in failing and "(rate(lucy_caption_requests_total[10m]) > 0)" in failing
    assert next(r for r in rules if r.get("alert") == "LucyDown")["expr"] == 'up{job="lucy"} == 0'


@pytest.mark.parametrize("broken", [
    ("> 0.5\n", "> 0.95\n"),  # a higher threshold misses the stream where nine requests in ten fail
    ("rate(lucy_questions_total[1h]) > 0)", "rate(lucy_questions_total[1h]) >= 0)"),  # 0/0 kept, as NaN
    ('up{job="lucy"} == 0', 'up{job="lucy"} == 1'),
])
def test_the_rule_tests_catch_a_broken_rule(tmp_path: Path, broken: tuple[str, str]) -> None:
    """The unit tests can fail: a copy of the rules with one mistake does not pass them."""
    text = RULES.read_text()
    assert broken[0] in text
    (tmp_path / RULES.name).write_text(text.replace(broken[0], broken[1]))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    done = _promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------ Grafana


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_grafana_dashboard_asks_for_its_data_source(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [(i["name"], i["type"], i["pluginId"]) for i in dashboard["__inputs"]] == [
        ("DS_PROMETHEUS", "datasource", "prometheus")]
    panels = dashboard["panels"]
    required = {(r["type"], r["id"]) for r in dashboard["__requires"]}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} <= required
    assert {("panel", p["type"]) for p in panels if p["type"] != "row"} <= required
    # Every reference to a data source is the import's input: nothing is left pointing at a variable or a uid
    # of the machine the dashboard came from.
    refs = [d["datasource"] for d in _walk(dashboard) if "datasource" in d]
    assert refs and all(ref == DATASOURCE for ref in refs), [r for r in refs if r != DATASOURCE]
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"] == DATASOURCE and panel["targets"], panel["title"]
            assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]
    assert not [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert "${datasource}" not in DASHBOARD.read_text()
    # Panels have their own ids and places on the 24-column grid, without overlaps.
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine
    # The new figures have panels; the confident share has no line (rather than 0) without answers.
    exprs = _exprs(dashboard)
    for needed in ("lucy_build_info", 'up{job="lucy"}', "lucy_mqtt_connected", "process_cpu_seconds_total",
                   "process_resident_memory_bytes", "process_open_fds", "lucy_stream_worker_cpu_seconds_total",
                   "lucy_stream_worker_resident_memory_bytes"):
        assert any(needed in e for e in exprs), needed
    share = next(p for p in panels if p["title"] == "Confident share")["targets"][0]["expr"]
    assert "lucy_questions_total" in share and "> 0)" in share
    # Every query is valid PromQL (promtool parses each as a recording rule, Grafana's variables filled in).
    filled = [e.replace("$stream", ".*").replace("$__rate_interval", "1m").replace("$__range", "1h") for e in exprs]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr_{i}", "expr": e}
                                                        for i, e in enumerate(filled)]}]}
    (tmp_path / "dashboard-rules.yml").write_text(yaml.safe_dump(rules))
    _passes(_promtool("check", "rules", str(tmp_path / "dashboard-rules.yml")))


# ------------------------------------------------------------------------------------------------ /metrics


def _scrape(server: LucyServer) -> tuple[str, dict[str, list[tuple[dict[str, str], float]]], dict[str, Any]]:
    """The exposition text, its samples by name, and its families by name."""
    with server.client(30) as c:
        r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in families.values():
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return r.text, samples, families


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float | None:
    found = [v for got, v in samples.get(name, []) if all(got.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def _deploy_metric_names() -> set[str]:
    """Metric names the dashboard and the rules read (not the rules' own recorded names, which hold a colon)."""
    text = " ".join(_exprs(json.loads(DASHBOARD.read_text())))
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    text += " " + " ".join(r["expr"] for r in rules)
    return set(re.findall(r"(?<![\w:])((?:lucy|process|python)_[a-z_]+)", text))


def test_metrics_of_a_real_server(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto,
                                  videos: dict[str, Path]) -> None:
    launched = time.time()
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-m",
                               "reconnect_initial_seconds": 0.2, "reconnect_max_seconds": 1.0})
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    with server.client() as c:
        assert c.post("/v1/streams", json={"name": "gate", "source": str(videos["short"])}).status_code == 201
        # paced like a live stream: its worker runs for the whole test
        assert c.post("/v1/streams", json={"name": "paced", "source": str(videos["a"]), "realtime": True,
                                           "captioner": "none"}).status_code == 201
    server.wait_captioned("gate")
    worker = wait_for(lambda: server.stream("paced").get("worker_pid"), 60, "the paced stream's worker")

    text, samples, families = _scrape(server)
    # Build info: always 1, labelled with what serves.
    assert samples["lucy_build_info"] == [({"version": __version__, "python": platform.python_version()}, 1.0)]
    # The server process's own figures (prometheus_client's process and platform collectors).
    assert (_value(samples, "process_resident_memory_bytes") or 0) > 20e6
    assert (_value(samples, "process_cpu_seconds_total") or 0) > 0
    assert 0 < (_value(samples, "process_open_fds") or 0) < (_value(samples, "process_max_fds") or 0)
    assert launched - 5 <= (_value(samples, "process_start_time_seconds") or 0) <= time.time()
    assert _value(samples, "python_info", version=platform.python_version()) == 1
    # Each stream's worker process: CPU time, and resident memory while it runs (as psutil reads it).
    worker_rss = _value(samples, "lucy_stream_worker_resident_memory_bytes", stream="paced") or 0
    assert abs(worker_rss - psutil.Process(worker).memory_info().rss) < 0.5 * worker_rss
    assert (_value(samples, "lucy_stream_worker_cpu_seconds_total", stream="paced") or 0) > 0
    # A stream whose worker has ended keeps its CPU time and loses its memory series.
    wait_for(lambda: _value(_scrape(server)[1], "lucy_stream_worker_resident_memory_bytes", stream="gate") is None,
             60, "the ended worker's memory series to go")
    assert _value(_scrape(server)[1], "lucy_stream_worker_cpu_seconds_total", stream="gate") is not None
    # The MQTT link.
    assert _value(samples, "lucy_mqtt_connected") == 1
    assert _value(samples, "lucy_mqtt_connects_total") == 1
    assert _value(samples, "lucy_mqtt_dropped_messages_total") == 0
    # A stream asked nothing has no confident share (not a 0 that reads as "never confident").
    assert _value(samples, "lucy_questions_total", stream="gate") == 0
    assert _value(samples, "lucy_question_confident_ratio", stream="gate") is None

    # Names and help follow Prometheus's conventions: promtool's linter passes, every family has help, counters
    # end in _total, Lucy's own are lucy_*.
    _passes(_promtool("check", "metrics", stdin=text))
    assert all(f.documentation.strip() for f in families.values()), [n for n, f in families.items()
                                                                     if not f.documentation.strip()]
    assert all(n.startswith(("lucy_", "process_", "python_")) for n in families)
    assert all(s.name.endswith("_total") for f in families.values() if f.type == "counter" for s in f.samples)

    with server.client() as c:
        r = c.post("/v1/streams/gate/questions", json={"question": "What number plate was shown?"})
    assert r.status_code == 200, r.text
    confident = r.json()["confident"]
    _, samples, _ = _scrape(server)
    assert _value(samples, "lucy_questions_total", stream="gate") == 1
    assert _value(samples, "lucy_question_confident_ratio", stream="gate") == (1.0 if confident else 0.0)
    # Every metric the dashboard and the rules read is one this server serves.
    used = _deploy_metric_names()
    assert len(used) >= 20 and used <= set(samples), used - set(samples)

    # The broker goes away and comes back: the gauge follows, the reconnect is counted.
    mosquitto.stop()
    wait_for(lambda: _value(_scrape(server)[1], "lucy_mqtt_connected") == 0, 60, "lucy_mqtt_connected 0")
    mosquitto.start()
    wait_for(lambda: _value(_scrape(server)[1], "lucy_mqtt_connected") == 1, 60, "lucy_mqtt_connected 1 again")
    assert _value(_scrape(server)[1], "lucy_mqtt_connects_total") == 2


def test_a_server_without_mqtt_has_no_mqtt_series(lucy_server: Callable[..., LucyServer]) -> None:
    """No bridge, no gauge: the LucyMqttDisconnected alert never fires for a server that has MQTT off."""
    _, samples, _ = _scrape(lucy_server())
    assert not [n for n in samples if n.startswith("lucy_mqtt_")]
    assert _value(samples, "lucy_build_info", version=__version__) == 1 and "process_cpu_seconds_total" in samples
