"""A Slack webhook stand-in for tests: an HTTP server on 127.0.0.1 that records what it is posted."""

from __future__ import annotations

import http.server
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import TypeVar

import pytest

from timescale import scaled

T = TypeVar("T")
HOOK_PATH = "/services/T000/B000/lk-never-shown"  # the part of a webhook that must never be shown


class Receiver:
    """An HTTP server on 127.0.0.1 that records every text posted to it (Slack's `{"text": ...}`), and
    every JSON object (`bodies`: the events of --notify-url)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.paths: list[str] = []
        self.bodies: list[dict] = []
        texts, paths, bodies = self.texts, self.paths, self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                paths.append(self.path)
                got = json.loads(body)
                bodies.append(got)
                if "text" in got:
                    texts.append(got["text"])
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"

    def wait_for(self, n: int, timeout: float = 60) -> list[str]:
        """Until `n` posts arrived (the timeout only ends a hang)."""
        return _wait_count(self.texts, n, timeout)

    def wait_bodies(self, n: int, timeout: float = 60) -> list[dict]:
        """Until `n` JSON objects arrived (the timeout only ends a hang)."""
        return _wait_count(self.bodies, n, timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _wait_count(got: list[T], n: int, timeout: float) -> list[T]:
    """A copy of `got` once it holds `n` items (filled by the server's threads; the timeout, scaled,
    only ends a hang)."""
    deadline = time.monotonic() + scaled(timeout)
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {got}"
        time.sleep(0.02)
    return list(got)


@pytest.fixture(name="hook")
def hook_fixture() -> Iterator[Receiver]:
    """`hook`: a Receiver for one test, closed after it (a test module imports this to use it)."""
    r = Receiver()
    yield r
    r.close()


class Trickle:
    """A server on 127.0.0.1 that answers a post with its headers, then one byte of body a second,
    for ever (the shape that held a finished job open: a deadline per read is no deadline)."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.accepted = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}{HOOK_PATH}"
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                while not self._stop.wait(1.0):
                    conn.sendall(b"o")
            except OSError:
                return  # the poster gave up and closed

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


class Redirect:
    """A server on 127.0.0.1 that answers every post with 302 to `to` (a Receiver, which must see
    nothing: redirects are not followed)."""

    def __init__(self, to: str) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Holding:
    """A webhook on 127.0.0.1 that reads every post and holds it unanswered until `release()`, then
    answers 200. `texts`: the posts read, in order; `given_up()`: those whose poster has closed its
    connection unanswered (the post's deadline passed), asked the moment it is called."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.held: list[tuple[str, socket.socket]] = []
        self.released = threading.Event()
        texts, held, released = self.texts, self.held, self.released

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                text = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["text"]
                texts.append(text)
                held.append((text, self.connection))
                released.wait(120)  # (a hang guard only)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the poster gave up

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"

    def given_up(self) -> list[str]:
        """The posts held whose poster closed the connection (not answered: released is not set)."""
        gone = []
        for text, conn in list(self.held):
            try:
                readable = select.select([conn], [], [], 0)[0]
                closed = bool(readable) and not conn.recv(1, socket.MSG_PEEK)
            except OSError:
                closed = True
            if closed:
                gone.append(text)
        return gone

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
