"""The dashboard's listening sockets, opened before the app is built.

``ragmeter serve`` binds and listens first, then imports and builds the app (about half a second):
a browser opened with the command is connected at once and answered when the app is ready,
instead of being refused. The sockets are those uvicorn itself would open (every address the host
name resolves to, ``SO_REUSEADDR``, IPv6 sockets IPv6 only), handed to ``uvicorn.Server.run``.
"""

from __future__ import annotations

import socket

from ragmeter.core.errors import ConfigError

#: uvicorn's default listen backlog
BACKLOG = 2048


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address of ``host`` at ``port``.

    Raises:
        ConfigError: the host does not resolve, or an address cannot be bound (port taken, not
            an address of this machine).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: the host does not resolve ({exc})") from None
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
            sock.listen(BACKLOG)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks
