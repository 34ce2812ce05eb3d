"""The dashboard's sockets, opened before its app is built: connections are accepted (queued) at
once, a taken port or a host that does not resolve is a clear configuration error."""

from __future__ import annotations

import socket

import pytest

from ragmeter.apps.server.listen import listen
from ragmeter.core.errors import ConfigError


def test_listening_sockets_accept_before_any_app():
    socks = listen("127.0.0.1", 0)
    try:
        assert len(socks) == 1
        port = socks[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            conn, _ = socks[0].accept()  # the handshake was done by the system, before accept
            with conn:
                client.sendall(b"ping")
                assert conn.recv(4) == b"ping"
        with pytest.raises(ConfigError, match=rf"cannot listen on 127\.0\.0\.1:{port}: "):
            listen("127.0.0.1", port)
    finally:
        for s in socks:
            s.close()


def test_a_host_that_does_not_resolve_is_a_config_error():
    with pytest.raises(ConfigError, match="does not resolve"):
        listen("no such host!", 0)
