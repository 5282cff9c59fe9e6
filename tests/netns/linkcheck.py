#!/usr/bin/env python3
"""Measures one TCP path between two network namespaces: round-trip time and bulk throughput.

There is no ping or iperf on the build machines; this is what `netns.sh check` runs.

    linkcheck.py serve ADDRESS PORT          # in one namespace: serves one client, then exits
    linkcheck.py measure ADDRESS PORT [--pings K] [--bytes N]   # in another: prints one JSON line

The client first bounces one byte K times (TCP_NODELAY; the round-trip time includes both
directions' shaping), then sends N bytes and waits for the server's one-byte acknowledgement
(throughput = N / time, so the last byte's delay is included, as in a real transfer).
"""

import argparse
import json
import socket
import statistics
import struct
import sys
import time

CHUNK = 1 << 20


def recv_exactly(sock, n):
    data = bytearray()
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("the peer closed the connection")
        data += part
    return bytes(data)


def serve(address, port, timeout):
    with socket.create_server((address, port), reuse_port=False) as listener:
        listener.settimeout(timeout)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(timeout)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pings = struct.unpack("!I", recv_exactly(conn, 4))[0]
            for _ in range(pings):
                conn.sendall(recv_exactly(conn, 1))
            remaining = struct.unpack("!Q", recv_exactly(conn, 8))[0]
            buffer = bytearray(CHUNK)
            view = memoryview(buffer)
            while remaining > 0:
                n = conn.recv_into(view, min(CHUNK, remaining))
                if n == 0:
                    raise ConnectionError("the client closed the connection early")
                remaining -= n
            conn.sendall(b"k")


def connect(address, port, timeout):
    deadline = time.monotonic() + timeout
    while True:  # the server may not listen yet
        try:
            return socket.create_connection((address, port), timeout=timeout)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def measure(address, port, pings, nbytes, timeout):
    with connect(address, port, timeout) as sock:
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(struct.pack("!I", pings))
        rtts = []
        for _ in range(pings):
            start = time.perf_counter()
            sock.sendall(b"p")
            recv_exactly(sock, 1)
            rtts.append((time.perf_counter() - start) * 1e6)
        payload = bytes(CHUNK)
        start = time.perf_counter()
        sock.sendall(struct.pack("!Q", nbytes))
        remaining = nbytes
        while remaining > 0:
            n = min(CHUNK, remaining)
            sock.sendall(payload[:n])
            remaining -= n
        recv_exactly(sock, 1)
        seconds = time.perf_counter() - start
    rtts.sort()
    return {
        "rtt_us_min": round(rtts[0], 1),
        "rtt_us_median": round(statistics.median(rtts), 1),
        "bytes": nbytes,
        "seconds": round(seconds, 4),
        "throughput_Mbit": round(nbytes * 8 / seconds / 1e6, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["serve", "measure"])
    parser.add_argument("address")
    parser.add_argument("port", type=int)
    parser.add_argument("--pings", type=int, default=200)
    parser.add_argument("--bytes", type=int, default=128 << 20)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for any one step")
    args = parser.parse_args()
    try:
        if args.mode == "serve":
            serve(args.address, args.port, args.timeout)
        else:
            print(json.dumps(measure(args.address, args.port, args.pings, args.bytes, args.timeout)))
    except (OSError, ConnectionError) as e:
        print(f"linkcheck.py {args.mode}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
