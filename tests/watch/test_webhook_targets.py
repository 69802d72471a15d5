"""Where webhooks may go (issue 26): cloud metadata, link-local and unspecified addresses and Ray's ports on loopback
are refused by name and literal address at registration, and again after resolution at delivery, where the request
goes to the very address that was checked (a name that resolves elsewhere a moment later is not followed)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from lucy.config import load_settings
from lucy.errors import WebhookRefused
from lucy.memory.watches import Alert, Watch
from lucy.metrics.stats import DeliveryStats
from lucy.watch.delivery import WebhookSink
from lucy.watch.targets import WebhookPolicy
from tests.service.test_watches import receiver

SERVER_PORT = 8321

REFUSED = ["http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xa9.0xfe.0xa9.0xfe/",
           "http://[fe80::1]/hook", "http://[::ffff:169.254.169.254]/", "http://metadata.google.internal/x",
           "http://Metadata.Google.Internal./x", "http://metadata/computeMetadata/v1/", "http://100.100.100.200/",
           "http://[fd00:ec2::254]/", "http://0.0.0.0:8123/", "http://[::]:8123/", "http://0/", "http://224.0.0.1/",
           "http://localhost:8265/api/jobs/", "http://127.0.0.1:6379/", "http://127.9.9.9:10001/",
           "http://[::1]:52365/", f"http://localhost:{SERVER_PORT}/v1/streams", "http://169.254.1.1:8123/"]
ALLOWED = ["http://127.0.0.1:8123/api/webhook/lucy", "http://localhost:8123/api/webhook/x", "http://[::1]:8123/",
           "http://192.168.1.10:8123/api/webhook/x", "http://10.0.0.5/", "http://homeassistant.local:8123/",
           "https://hooks.example.com/lucy", "http://hooks.example.com:8265/"]  # Ray's port elsewhere is no Ray


@pytest.mark.parametrize("url", REFUSED)
def test_refused_at_registration(url: str) -> None:
    with pytest.raises(WebhookRefused, match="webhooks may not go to"):
        WebhookPolicy(server_port=SERVER_PORT).check_url(url)


@pytest.mark.parametrize("url", ALLOWED)
def test_loopback_and_lan_stay_allowed(url: str) -> None:
    WebhookPolicy(server_port=SERVER_PORT).check_url(url)


def test_allowed_hosts_restrict_to_those_named() -> None:
    hosts = load_settings(**{"alerts.webhook_allowed_hosts": ["HomeAssistant.local", "*.hooks.example.com",
                                                               "192.168.1.10"]}).alerts.webhook_allowed_hosts
    policy = WebhookPolicy(hosts, server_port=SERVER_PORT)
    for url in ("http://homeassistant.local:8123/x", "https://a.hooks.example.com/x", "http://192.168.1.10/"):
        policy.check_url(url)
    for url in ("http://hooks.example.com.evil/x", "http://evilhooks.example.com/x", "http://192.168.1.11/",
                "http://127.0.0.1:8123/", "http://localhost/"):
        with pytest.raises(WebhookRefused, match="alerts.webhook_allowed_hosts"):
            policy.check_url(url)
    with pytest.raises(ValueError, match="webhook_allowed_hosts"):
        load_settings(**{"alerts.webhook_allowed_hosts": ["http://x.example/"]})


class FakeDns:
    """``socket.getaddrinfo`` with some names of our own: each a list of answers, one per lookup (the last one
    repeats); other names and literal addresses are looked up for real."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names, self.lookups = names, dict.fromkeys(names, 0)
        self.real = socket.getaddrinfo

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.names:
            return self.real(host, port, *args, **kwargs)
        answers = self.names[name]
        address = answers[min(self.lookups[name], len(answers) - 1)]
        self.lookups[name] += 1
        return self.real(address, port, *args, **kwargs)


def deliver(urls: list[str]) -> DeliveryStats:
    """One webhook to each URL, by a WebhookSink; back once each has its final outcome."""
    settings = load_settings(**{"alerts.webhook_retries": 0, "alerts.webhook_timeout_seconds": 5}).alerts
    stats = DeliveryStats()

    async def run() -> None:
        sink = WebhookSink(settings, stats, policy=WebhookPolicy(server_port=SERVER_PORT))
        for i, url in enumerate(urls, 1):
            alert = Alert(id=i, watch_id=i, stream="cam", question="q", start=0, end=1, reason="seen", frame_time=0.5,
                          level="coarse", created=time.time(), event_end=1)
            sink.deliver(alert, Watch(id=i, stream="cam", question="q", webhook_url=url), {"id": i})
        for _ in range(500):
            if sum(stats.snapshot()[1].values()) >= len(urls):
                break
            await asyncio.sleep(0.02)
        await sink.close()

    asyncio.run(run())
    return stats


def test_delivery_checks_the_resolved_address_and_connects_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with receiver([]) as (got, url):
        port = url.rsplit(":", 1)[1].split("/")[0]
        dns = FakeDns({"metadata-alias.test": ["169.254.169.254"], "ray-alias.test": ["127.0.0.1"],
                       "flip.test": ["127.0.0.1", "169.254.169.254"], "home.test": ["127.0.0.1"]})
        monkeypatch.setattr(socket, "getaddrinfo", dns)
        stats = deliver(["http://metadata-alias.test/latest/", "http://ray-alias.test:8265/api/jobs/",
                         f"http://flip.test:{port}/hook", f"http://home.test:{port}/hook"])
        outcomes = stats.snapshot()[1]
        # The names that resolve to refused addresses are never connected to; the others get their POST, sent to
        # the address checked (flip.test is looked up once: the request does not look it up again, and so never
        # goes to the metadata address it turns into).
        assert outcomes == {("webhook", "refused"): 2, ("webhook", "delivered"): 2}, outcomes
        assert dns.lookups["flip.test"] == 1
        assert sorted(headers["host"] for headers, _, _ in got.requests) == [f"flip.test:{port}", f"home.test:{port}"]


def test_delivery_metrics_name_no_host_port_or_status() -> None:
    """A refused port, an HTTP 404 and a refused address all count as outcomes of the sink, nothing more."""
    with receiver([404]) as (_, url), socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # a port nothing listens on
        stats = deliver([url, f"http://127.0.0.1:{closed.getsockname()[1]}/", "http://169.254.169.254/"])
    outcomes = stats.snapshot()[1]
    assert outcomes == {("webhook", "failed"): 2, ("webhook", "refused"): 1}, outcomes
