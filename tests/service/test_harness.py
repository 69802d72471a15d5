"""The test harness's own promise: a server whose port another process bound first (parallel workers pick free
ports at once) is started again on a new port instead of failing every test that shares it."""

from __future__ import annotations

import socket
from collections.abc import Callable

from tests.service.conftest import LucyServer


def test_a_port_taken_before_the_server_binds_it_is_replaced(lucy_server: Callable[..., LucyServer]) -> None:
    server = lucy_server(start=False)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        first = server.port
        server.start()
        assert server.port != first
        assert "address already in use" in server.log()
        with server.client() as c:
            assert c.get("/readyz").status_code == 200
