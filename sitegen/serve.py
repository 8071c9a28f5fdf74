"""Preview a built site: ``kb export DIR --serve`` serves DIR on 127.0.0.1 only (Pagefind needs http)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"


class QuietHandler(SimpleHTTPRequestHandler):
    """Static files, no directory listings beyond what http.server does, no request log on stderr."""

    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
        ".css": "text/css",
        ".svg": "image/svg+xml",
        ".html": "text/html; charset=utf-8",
    }

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        pass


def make_server(site: Path, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server for ``site`` bound to 127.0.0.1 (port 0: any free port); call serve_forever()."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server


def serve_in_thread(site: Path, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start serving in a daemon thread; return the server (``shutdown()`` it) and its base URL."""
    server = make_server(site, port)
    threading.Thread(target=server.serve_forever, name="kb-site", daemon=True).start()
    return server, server_url(server)


def server_url(server: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{server.server_address[1]}/"


def serving_text(url: str) -> str:
    """What `kb export --serve` prints while it serves."""
    return f"serving {url} (127.0.0.1 only); Ctrl-C to stop\n"
