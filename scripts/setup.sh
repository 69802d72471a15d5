#!/usr/bin/env bash
# One-time (and idempotent) set-up on a Debian machine: system packages, a virtual environment, Lucy itself.
# Called by `make demo` and `make test`; safe to run again (it only does what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: FFmpeg (benchmarks), Tesseract (OCR captioner), GStreamer's RTSP server (live-stream tests),
# Mosquitto, its clients (mosquitto_sub / mosquitto_pub, which the README uses) and OpenSSL (MQTT tests, TLS
# included), Chromium + driver (dashboard tests), espeak-ng (speech made for the transcription tests), Prometheus
# (promtool checks the alert rules in the tests), PostgreSQL (the cluster memory store's tests start their own
# server), jemalloc (the server's allocator: lucy/allocator.py says why).
APT_PACKAGES=(
  python3-venv python3-dev ffmpeg tesseract-ocr tesseract-ocr-eng libjemalloc2
  python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-rtsp gstreamer1.0-x
  mosquitto mosquitto-clients chromium chromium-driver openssl espeak-ng prometheus postgresql
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.lucy-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Lucy and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
