#!/usr/bin/env python3
"""Joins stdin/stdout to a TCP connection: tcp_pipe.py HOST PORT.

qemu's user-mode network runs it for every connection the guest opens to a `guestfwd`
address (guestfwd=tcp:10.0.2.100:18515-cmd:tcp_pipe.py 127.0.0.1 PORT), so a program in the
rxe VM can reach a TCP server on the host (perftest / ibv_rc_pingpong handshakes with
Hematite as the TCP server) while the VM stays isolated (restrict=on).
"""
import os
import select
import socket
import sys


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    try:
        s = socket.create_connection((host, port), timeout=10)
    except OSError as e:
        sys.stderr.write("tcp_pipe: %s:%d: %s\n" % (host, port, e))
        return 1
    s.settimeout(None)
    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    open_in = True
    while True:
        rl = [s] + ([inp] if open_in else [])
        r, _, _ = select.select(rl, [], [])
        if inp in r:
            d = os.read(inp, 65536)
            if d:
                s.sendall(d)
            else:
                open_in = False
                s.shutdown(socket.SHUT_WR)
        if s in r:
            d = s.recv(65536)
            if not d:
                return 0
            while d:
                n = os.write(out, d)
                d = d[n:]


if __name__ == "__main__":
    sys.exit(main())
