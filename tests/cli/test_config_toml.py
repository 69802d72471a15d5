"""`lucy config show` prints TOML that can be pasted into lucy.toml: parsed back, it gives the same settings."""

from __future__ import annotations

import tomllib

from lucy.config import load_settings

SECRET = "a-token-that-must-not-be-printed"
ENV = {"LUCY_INGEST__CODEC": "zstd", "LUCY_INGEST__JPEG_QUALITY": "71",
       "LUCY_SERVICE__ALLOWED_HOSTS": '["cam.example"]', "LUCY_CAPTIONER__PIXELS__OCR_MIN_CONFIDENCE": "55",
       "LUCY_MQTT__ENABLED": "true", "LUCY_MQTT__URL": "mqtt://broker.example:1883", "LUCY_SERVICE__API_TOKEN": SECRET}


def test_config_show_is_toml_that_loads_back_to_the_same_settings(run_lucy, tmp_path, monkeypatch):
    shown = run_lucy("config", "show", "--preset", "egomem", "--data", str(tmp_path / "my data"), env=ENV)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    parsed = tomllib.loads(text)  # valid TOML: no None, True or Python reprs
    assert "None" not in text and "True" not in text and SECRET not in text
    assert parsed["preset"] == "egomem" and parsed["data"] == str(tmp_path / "my data")
    assert parsed["ingest"]["codec"] == "zstd" and parsed["mqtt"]["enabled"] is True
    assert parsed["service"]["allowed_hosts"] == ["cam.example"]
    assert "api_token" not in parsed["service"] and "# api_token = (secret: not shown; set it here or in " \
        "LUCY_SERVICE__API_TOKEN)" in text
    assert "mqtt" in parsed and "username" not in parsed["mqtt"] and "# username = (not set)" in text
    assert "levels" not in parsed and "#   coarse     span_seconds = 800.0, fps = 0.25" in text

    pasted = tmp_path / "lucy.toml"
    pasted.write_text(text)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    expected = load_settings(data=tmp_path / "my data", preset="egomem").model_dump(mode="json")
    for key in ENV:
        monkeypatch.delenv(key)
    loaded = load_settings(pasted).model_dump(mode="json")  # the file alone, no environment, no flags
    assert expected["service"].pop("api_token") is not None and loaded["service"].pop("api_token") is None
    assert loaded == expected


def test_defaults_round_trip_too(run_lucy, tmp_path):
    shown = run_lucy("config", "show")
    assert shown.returncode == 0, shown.stderr
    (tmp_path / "lucy.toml").write_text(shown.stdout)
    assert load_settings(tmp_path / "lucy.toml") == load_settings()
