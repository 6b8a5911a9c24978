"""Hostile HTTP servers for the call-bounds tests (test-only): `python hostile_http.py MODE`.

Prints its port on stdout, then serves on 127.0.0.1 until killed (every loop is also bounded by
`MAX_SECONDS`, so a forgotten server stops by itself):

* `slowloris` - answers 200 with a large Content-Length, then one byte of the body every 0.1 s;
* `endless`   - answers 200 with a chunked body that never ends, 64 KiB chunks as fast as the client reads;
* `trickle`   - answers one byte a second from the status line on (the headers never end), so no read
  ever waits long enough to time out.
"""

from __future__ import annotations

import socket
import sys
import threading
import time

MAX_SECONDS = 180


def serve(connection: socket.socket, mode: str) -> None:
    started = time.monotonic()
    try:
        connection.recv(65536)
        if mode == "trickle":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Padding: " + b"x" * 100000
            for byte in head:
                if time.monotonic() - started >= MAX_SECONDS:
                    break
                connection.sendall(bytes([byte]))
                time.sleep(1.0)
        elif mode == "slowloris":
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n")
            while time.monotonic() - started < MAX_SECONDS:
                connection.sendall(b" ")
                time.sleep(0.1)
        else:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"
            while time.monotonic() - started < MAX_SECONDS:
                connection.sendall(chunk)
    except OSError:
        pass
    finally:
        connection.close()


def main() -> None:
    mode = sys.argv[1]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)
    deadline = time.monotonic() + MAX_SECONDS
    listener.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        threading.Thread(target=serve, args=(connection, mode), daemon=True).start()


if __name__ == "__main__":
    main()
