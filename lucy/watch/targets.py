"""Where webhooks may go. A webhook makes the server connect outward to a URL a client chose, so without limits it
would fetch cloud metadata credentials (``169.254.169.254``, ``metadata.google.internal``), reach Ray's dashboard
on loopback (``localhost:8265``: anyone who reaches it runs code on the cluster) or probe ports for the client.

Always refused: link-local addresses (169.254.0.0/16, fe80::/10: where clouds put their metadata services), the
metadata services' other names and addresses (``metadata.google.internal``, ``metadata``, ``fd00:ec2::254``,
``100.100.100.200``...), unspecified, multicast and "this network" addresses (0.0.0.0 reaches the machine itself),
and on loopback this server's own port and Ray's well-known ports (:data:`RAY_PORTS`). Loopback and LAN addresses
stay allowed otherwise: Home Assistant on the same machine or network is the main receiver. With
``alerts.webhook_allowed_hosts`` set, only the hosts it names.

A URL is checked when its watch is registered (by name and literal address) and again at every delivery against
each address its host resolves to; the request then goes to the checked address (the URL's host stays in ``Host``
and in TLS's SNI and certificate check), so a name that resolves elsewhere a moment later ("DNS rebinding") is
never followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from lucy.errors import WebhookRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal", "metadata.azure.com"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16"))
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
# Ray's head listens here by default: GCS, dashboard (its job API runs code), client server, dashboard agent
RAY_PORTS = frozenset({6379, 8265, 10001, 52365})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address if it is one, in any form a resolver accepts (``2852039166``, ``0xa9.254.169.254``)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.ip_address(socket.inet_aton(host))  # the old inet_aton forms getaddrinfo takes
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class WebhookPolicy:
    """The hosts and addresses webhooks may go to (see the module's doc); ``server_port``: this server's port."""

    def __init__(self, allowed_hosts: Sequence[str] = (), *, server_port: int | None = None) -> None:
        self.names = frozenset(h for h in allowed_hosts if not h.startswith("*."))
        self.suffixes = tuple(h[1:] for h in allowed_hosts if h.startswith("*."))  # ".example.com"
        self.restricted = bool(allowed_hosts)
        self.loopback_ports = RAY_PORTS | ({server_port} if server_port else set())

    def check_url(self, url: str) -> tuple[str, int]:
        """The URL's host and port, if a webhook may go there by name; raises :class:`WebhookRefused` if not."""
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if parts.scheme not in ("http", "https") or not host:
            raise WebhookRefused("the webhook URL must be http://host/... or https://host/...")
        if host in METADATA_NAMES or host.endswith(".metadata.google.internal"):
            raise WebhookRefused(f"webhooks may not go to {host}: a cloud metadata service")
        if self.restricted and host not in self.names and not host.endswith(self.suffixes):
            raise WebhookRefused(f"webhooks may not go to {host}: it is not in alerts.webhook_allowed_hosts")
        address = literal_address(host)
        if address is not None:
            self.check_address(address, port, host)
        elif host in LOOPBACK_NAMES:
            self.check_address(ipaddress.ip_address("127.0.0.1"), port, host)
        return host, port

    def check_address(self, address: IPAddress, port: int, host: str) -> None:
        """Refuse an address (one ``host`` is, or resolves to) that webhooks may never reach."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        why = None
        if address in METADATA_ADDRESSES:
            why = "a cloud metadata address"
        elif address.is_link_local:
            why = "a link-local address"
        elif address.is_unspecified or address.is_multicast or (
                isinstance(address, ipaddress.IPv4Address) and address in THIS_NETWORK):
            why = "not an address to send to"
        elif address.is_loopback and port in self.loopback_ports:
            why = f"port {port} on this machine is this server's or Ray's"
        if why is not None:
            shown = host if host == str(address) else f"{host} ({address})"
            raise WebhookRefused(f"webhooks may not go to {shown}:{port}: {why}")

    async def resolve(self, url: str) -> str:
        """The address a delivery to ``url`` connects to: the first its host resolves to, after checking them all
        (one refused address refuses the host: a resolver may hand out any of them). Raises
        :class:`WebhookRefused`, or OSError when the name does not resolve (a failure worth retrying)."""
        host, port = self.check_url(url)
        address = literal_address(host)
        if address is not None:
            return str(address)
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
        for resolved in addresses:
            self.check_address(resolved, port, host)
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
        return str(addresses[0])
