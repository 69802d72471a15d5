"""First-day figures: how long Lucy's commands take to start, whether search says "no good match", and how much an
idle stream says over MQTT.

Each figure comes from fresh processes run as a user runs them (the ``lucy`` entry point of this environment, the
default backends, no ``LUCY_*`` settings of the caller's), in one run:

  1. start-up: ``lucy --help``; ``lucy ask`` of a question whose answer is already in memory (asked once before the
     timed runs, so that what a first answer captioned is stored); ``lucy serve`` from launch to ``/readyz``
     answering 200 (then stopped, as Ctrl-C would). Wall seconds of the whole process, the median of ``--runs`` (11);
  2. search relevance: ``lucy search --json`` of queries about things the stream never showed (how many return
     nothing, as they should) beside queries of things it showed (how many return something, so that "nothing" is
     not all search can say);
  3. MQTT, idle: a real mosquitto on loopback and ``lucy serve`` with its bridge, two file streams left finished;
     after they settle, ``mosquitto_sub`` counts every message published under the topic prefix and Home Assistant's
     discovery prefix for ``--idle-seconds`` (default 610: two of the status heartbeat's 300 s), per stream, scaled
     to an hour. Retained messages a new subscription is sent are not counted (nothing published them then).

  4. a stream's worker: from asking for the process to its having imported what a worker runs
     (``lucy.runtime.worker``), spawned as an interpreter of its own (the baseline) and forked from the server's
     preloaded fork server (what ``lucy serve`` does: :data:`lucy.runtime.worker_process.PRELOAD`); the fork
     server's own start, paid once per server, is given apart.

The stream is bench/service.py's two-minute question video (signs, colours, boxes at known times), ingested once with
``lucy ingest`` (defaults).

    .venv/bin/python bench/startup.py                       # about 15 minutes on 2 cores, 10 of them idle MQTT
    .venv/bin/python bench/startup.py --runs 5 --idle-seconds 120 --no-mqtt
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
from service import question_video  # bench/ is on the path as a script

from lucy.testing.waiting import free_port, stop_process

LUCY = str(Path(sys.executable).with_name("lucy"))
STREAM = "cam"
QUESTION = "What time does platform 7 depart?"  # on a sign of the video: answered from coarse memory
# Things the question video never shows (it shows signs about a van's plate, a platform, a store, coloured
# backgrounds and orange boxes): each search should come back empty.
ABSENT = [
    "a dog running across a lawn", "people dancing at a wedding", "snow falling on mountains", "a cat asleep on a sofa",
    "fireworks over a harbour", "a surgeon operating", "children playing football", "a horse jumping a fence",
    "rain on a car windscreen", "a chef slicing onions", "an aeroplane taking off", "a crowd at a rock concert",
    "waves breaking on a beach", "a man riding a bicycle", "an elephant bathing in a river",
    "someone typing on a laptop",
    "a bowl of ramen noodles", "a fire truck with its sirens on", "a baby laughing", "autumn leaves in a park",
]
# Things it does show, in other words as well as its own: each should find something.
PRESENT = ["the van's number plate", "when the store closes", "platform departure time", "orange boxes",
           "a green background"]


def env() -> dict[str, str]:
    """The children's environment: the defaults (none of the caller's ``LUCY_*`` settings)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}


CPU: list[float] = []  # user + system seconds of each child :func:`wall` ran (a busy machine changes them less)


def wall(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    began, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, capture_output=True, text=True, env=env(), cwd=cwd, timeout=600, check=False)
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds, done


def median_line(name: str, walls: list[float], cpus: list[float] | None = None) -> str:
    cpu = f"; CPU median {statistics.median(cpus):.2f} s" if cpus else ""
    return (f"{name:34} median {statistics.median(walls):6.2f} s  (min {min(walls):.2f}, max {max(walls):.2f}, "
            f"{len(walls)} runs{cpu})")


def serve_to_ready(data: Path, cwd: Path, extra: dict[str, str] | None = None) -> tuple[float, subprocess.Popen[bytes],
                                                                                        str]:
    """Launch ``lucy serve`` on ``data``; seconds until /readyz answers 200, the process and its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(cwd / f"serve-{port}.log", "wb")  # noqa: SIM115  (the child keeps it)
    began = time.perf_counter()
    proc = subprocess.Popen([LUCY, "serve", "--data", str(data), "--port", str(port)], stdout=log, stderr=log,
                            env={**env(), **(extra or {})}, cwd=cwd)
    log.close()
    while True:
        if proc.poll() is not None:
            said = (cwd / f"serve-{port}.log").read_text()[-2000:]
            raise RuntimeError(f"lucy serve exited {proc.returncode}: {said}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return time.perf_counter() - began, proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.02)


def startup(data: Path, cwd: Path, runs: int) -> dict[str, list[float]]:
    print(f"\n1. start-up: wall seconds of a fresh process, {runs} runs each", flush=True)
    print(f"   (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start: wall times grow with it, "
          "CPU seconds much less)")
    CPU.clear()
    helps = [wall([LUCY, "--help"], cwd)[0] for _ in range(runs)]
    print(median_line("lucy --help", helps, CPU[-runs:]), flush=True)
    ask = [LUCY, "ask", QUESTION, "--stream", STREAM, "--data", str(data), "--json"]
    _, first = wall(ask, cwd)  # what a first answer looks at closer is stored: the timed runs read it back
    asks, costs = [], Counter[str]()
    for _ in range(runs):
        seconds, done = wall(ask, cwd)
        asks.append(seconds)
        reply = json.loads(done.stdout)
        costs.update(caption_calls=reply.get("caption_calls", 0), llm_calls=reply.get("llm_calls", 0))
    print(median_line("lucy ask, answered from memory", asks, CPU[-runs:]) +
          f"; {costs['caption_calls']} caption and {costs['llm_calls']} LLM calls in all timed runs;"
          f" answer: {json.loads(first.stdout).get('answer')!r}", flush=True)
    serves = []
    for _ in range(runs):
        seconds, proc, _ = serve_to_ready(data, cwd)
        serves.append(seconds)
        proc.send_signal(signal.SIGTERM)
        stop_process(proc)
    print(median_line("lucy serve, launch to /readyz 200", serves), flush=True)
    return {"help": helps, "ask": asks, "serve": serves, "load": os.getloadavg()[0]}


def relevance(data: Path, cwd: Path) -> dict[str, int]:
    print(f"\n2. search relevance: lucy search --json on stream {STREAM}", flush=True)

    def found(query: str) -> int:
        return len(json.loads(wall([LUCY, "search", query, "--data", str(data), "--json"], cwd)[1].stdout))

    absent = [found(q) for q in ABSENT]
    present = [found(q) for q in PRESENT]
    empty = sum(n == 0 for n in absent)
    print(f"queries of things never shown: {empty} of {len(ABSENT)} return nothing "
          f"({sum(absent)} results in all from the others)")
    print(f"queries of things shown:       {sum(n > 0 for n in present)} of {len(PRESENT)} return something "
          f"(results: {present})", flush=True)
    return {"absent": len(ABSENT), "absent_empty": empty, "present": len(PRESENT),
            "present_found": sum(n > 0 for n in present)}


def mqtt_idle(video: Path, cwd: Path, idle_seconds: float) -> dict[str, object]:
    print(f"\n3. MQTT, idle: two finished file streams, {idle_seconds:g} s counted with mosquitto_sub", flush=True)
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])  # Debian puts the broker in sbin
    for tool in ("mosquitto", "mosquitto_sub"):
        if shutil.which(tool, path=search) is None:
            raise SystemExit(f"{tool} is missing: scripts/setup.sh installs it")
    broker_port = free_port()
    conf = cwd / "mosquitto.conf"
    conf.write_text(f"listener {broker_port} 127.0.0.1\npersistence false\nallow_anonymous true\n"
                    f"user {getpass.getuser()}\n")
    mosquitto = shutil.which("mosquitto", path=search)
    broker = subprocess.Popen([str(mosquitto), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = cwd / "mqtt-data"
    server = sub = None
    try:
        time.sleep(0.5)
        _, server, url = serve_to_ready(data, cwd, {"LUCY_MQTT__ENABLED": "true",
                                                    "LUCY_MQTT__URL": f"mqtt://127.0.0.1:{broker_port}"})
        names = ["gate", "yard"]
        with httpx.Client(base_url=url, timeout=60) as client:
            for name in names:
                r = client.post("/v1/streams", json={"name": name, "source": str(video)})
                r.raise_for_status()
            deadline = time.monotonic() + 900
            while not all(client.get(f"/v1/streams/{n}").json().get("state") == "finished" for n in names):
                if time.monotonic() > deadline:
                    raise RuntimeError("the streams did not finish in 15 minutes")
                time.sleep(1)
        time.sleep(15)  # the last status changes (finished, the worker gone) go out
        out = open(cwd / "mqtt-idle.txt", "w")  # noqa: SIM115  (the child keeps it)
        began = time.time()
        sub = subprocess.Popen(["mosquitto_sub", "-p", str(broker_port), "-F", "%U %r %t %p", "-t", "lucy/#",
                                "-t", "homeassistant/#"], stdout=out, stderr=subprocess.DEVNULL)
        out.close()
        time.sleep(idle_seconds)
    finally:
        for proc in (sub, server, broker):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                stop_process(proc)
    lines = [line.split(" ", 3) for line in (cwd / "mqtt-idle.txt").read_text().splitlines() if line.count(" ") >= 2]
    retained = sum(flag == "1" for _, flag, *_ in lines)
    published = [(float(at) - began, topic, rest[0] if rest else "") for at, flag, topic, *rest in lines if flag == "0"]
    live = [topic for _, topic, _ in published]
    per_stream = {n: sum(f"/{n}/" in t or t.endswith(f"/{n}") or f"_{n}_" in t or f"/{n}_" in t for t in live)
                  for n in names}
    topics = Counter(live)
    hours = idle_seconds / 3600
    print(f"{len(live)} messages published in {idle_seconds:g} s ({retained} retained ones sent on subscribing, "
          f"not counted); by topic: {dict(topics) or 'none'}")
    for n, count in per_stream.items():
        mine = [(at, payload) for at, topic, payload in published if topic.endswith(f"/{n}/status")]
        changed = sum(a != b for (_, a), (_, b) in zip(mine, mine[1:], strict=False))
        print(f"  stream {n}: {count} messages = {count / hours:.1f} per hour (scaled from {idle_seconds:g} s); "
              f"status at {', '.join(f'{at:.0f}' for at, _ in mine) or '-'} s, {changed} of them unlike the one before")
    others = len(live) - sum(per_stream.values())
    print(f"  not of a stream: {others} = {others / hours:.1f} per hour", flush=True)
    return {"seconds": idle_seconds, "messages": len(live), "retained_on_subscribe": retained,
            "per_stream_per_hour": {n: c / hours for n, c in per_stream.items()}, "topics": dict(topics)}


# Run in a fresh ``python -c`` process (a server has no main script for its children to import again): each start
# asks for a process whose first step is what a stream worker imports (lucy.runtime.worker_process._serve_stream).
_WORKER_STARTS = """
import importlib, json, multiprocessing, sys, time
from lucy.runtime.worker_process import PRELOAD
runs, out = int(sys.argv[1]), {}
for method in ("spawn", "forkserver"):
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(list(PRELOAD))
    out[method] = []
    for k in range(runs + (method == "forkserver")):  # the first fork also starts the fork server
        began = time.perf_counter()
        process = ctx.Process(target=importlib.import_module, args=("lucy.runtime.worker",))
        process.start()
        process.join()
        assert process.exitcode == 0, (method, process.exitcode)
        out[method].append(time.perf_counter() - began)
print(json.dumps(out))
"""


def worker_start(runs: int) -> dict[str, object]:
    print(f"\n4. a stream's worker: wall seconds from start to its modules imported, {runs} starts each", flush=True)
    done = subprocess.run([sys.executable, "-c", _WORKER_STARTS, str(runs)], capture_output=True, text=True,
                          check=True, env=env(), timeout=600)
    times = json.loads(done.stdout)
    first, forks = times["forkserver"][0], times["forkserver"][1:]
    spawn, fork = statistics.median(times["spawn"]), statistics.median(forks)
    print(f"  spawned (baseline)          {spawn:6.3f} s median", flush=True)
    print(f"  forked from the fork server {fork:6.3f} s median = {fork / spawn:.3f}x the baseline "
          f"(the fork server's own start, once per server: {first:.2f} s)", flush=True)
    return {"spawn_seconds": times["spawn"], "fork_seconds": forks, "fork_server_start": first}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per start-up figure (the median)")
    parser.add_argument("--idle-seconds", type=float, default=610.0, help="idle MQTT window counted")
    parser.add_argument("--no-mqtt", action="store_true", help="skip the idle MQTT count")
    parser.add_argument("--workers-only", action="store_true", help="only figure 4, a stream worker's start")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.workers_only:
        figures_only = {"workers": worker_start(args.runs)}
        if args.json:
            args.json.write_text(json.dumps(figures_only, indent=1))
        return 0
    video = question_video()
    with tempfile.TemporaryDirectory(prefix="lucy-startup-") as tmp:
        cwd = Path(tmp)
        data = cwd / "data"
        print(f"ingesting {video.name} as stream {STREAM} (lucy ingest, defaults)...", flush=True)
        seconds, _ = wall([LUCY, "ingest", str(video), "--stream", STREAM, "--data", str(data)], cwd)
        print(f"  ingested in {seconds:.0f} s", flush=True)
        figures: dict[str, object] = {"startup": startup(data, cwd, args.runs), "search": relevance(data, cwd)}
        if not args.no_mqtt:
            figures["mqtt"] = mqtt_idle(video, cwd, args.idle_seconds)
    figures["workers"] = worker_start(args.runs)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
