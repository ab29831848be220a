#!/usr/bin/env python3
"""Run a shell command in a Soft-RoCE guest over its command channel.

    vmctl.py [--timeout SECONDS] SOCKET 'COMMAND'

SOCKET is the UNIX stream socket that qemu serves for the guest's second serial port
(`-chardev socket,id=ctl,path=SOCKET,server=on,wait=off -serial chardev:ctl`). The guest's
init (tests/interop/vm/init) reads one line `TAG COMMAND`, runs COMMAND and answers

    @@hm-begin TAG@@
    OUTPUT
    @@hm-end TAG RC@@

This prints OUTPUT (only what lies between the two markers with our tag, so the late output
of an earlier command that timed out is never taken for ours) and exits with RC; 124 when
the answer does not come within the timeout, 125 when the connection closes first.
A command is one line: newlines in COMMAND are sent as spaces.
"""
import argparse
import os
import re
import socket
import sys
import time


def run(sock_path, command, timeout):
    tag = "%d.%d" % (os.getpid(), time.monotonic_ns() % 1000000007)
    begin = ("@@hm-begin %s@@\n" % tag).encode()
    end = re.compile(rb"\n@@hm-end " + re.escape(tag.encode()) + rb" (\d+)@@\n")
    deadline = time.monotonic() + timeout
    s = None
    while s is None:       # the socket appears a moment after qemu starts
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # (a stalled qemu leaves earlier connections unaccepted; once its backlog is full
            # a blocking connect would wait forever)
            s.settimeout(max(0.1, deadline - time.monotonic()))
            s.connect(sock_path)
        except OSError as e:
            s.close()
            s = None
            if time.monotonic() > deadline:
                sys.stderr.write("vmctl: cannot connect to %s: %s\n" % (sock_path, e))
                return 125
            time.sleep(0.2)
    try:
        s.sendall(("%s %s\n" % (tag, command.replace("\n", " "))).encode())
    except OSError as e:
        s.close()
        sys.stderr.write("vmctl: no answer within %g s to: %s (send: %s)\n" % (timeout, command, e))
        return 124
    buf = b""
    try:
        while True:
            b = buf.find(begin)
            if b >= 0:
                m = end.search(buf, b + len(begin))
                if m:
                    out = buf[b + len(begin):m.start()]
                    if out and not out.endswith(b"\n"):
                        out += b"\n"
                    sys.stdout.buffer.write(out)
                    sys.stdout.flush()
                    return int(m.group(1))
            left = deadline - time.monotonic()
            if left <= 0:
                if b >= 0:
                    sys.stdout.buffer.write(buf[b + len(begin):])
                sys.stderr.write("vmctl: no answer within %g s to: %s\n" % (timeout, command))
                return 124
            s.settimeout(left)
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                sys.stderr.write("vmctl: the guest's command channel closed\n")
                return 125
            buf += d
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("socket")
    ap.add_argument("command")
    a = ap.parse_args()
    return run(a.socket, a.command, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
