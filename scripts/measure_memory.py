#!/usr/bin/env python3
"""Measures how much a kartei server's resident memory grows while it receives
and while it serves a ~200 MB original (an 8192x8192 RGB PNG of noise, stored
without compression). Prints the growth next to the file size.

Usage: measure_memory.py BASE_URL TOKEN SERVER_PID
"""
import http.client
import json
import os
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request
import zlib

SIDE = 8192


def png_file(path: str) -> int:
    """Writes the PNG without holding it whole: stored (level 0) deflate blocks."""
    row = SIDE * 3
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")

        def chunk(tag: bytes, data: bytes) -> None:
            f.write(struct.pack(">I", len(data)) + tag + data)
            f.write(struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

        chunk(b"IHDR", struct.pack(">IIBBBBB", SIDE, SIDE, 8, 2, 0, 0, 0))
        comp = zlib.compressobj(0)
        pending = b""
        for _ in range(SIDE):
            pending += comp.compress(b"\x00" + os.urandom(row))
            if len(pending) > (4 << 20):
                chunk(b"IDAT", pending)
                pending = b""
        pending += comp.flush()
        chunk(b"IDAT", pending)
        chunk(b"IEND", b"")
    return os.path.getsize(path)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Peak:
    def __init__(self, pid: int):
        self.pid, self.peak, self.running = pid, 0, True
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while self.running:
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(0.01)

    def __enter__(self):
        self.peak = rss_kib(self.pid)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def upload(base: str, token: str, path: str) -> str:
    u = urllib.parse.urlparse(base)
    boundary = "kartei-memory-measurement"
    head = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"context\"\r\n\r\nmemory\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.png\"\r\n"
        "Content-Type: image/png\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = os.path.getsize(path)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.putrequest("POST", "/binaries/upload")
    conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
    conn.endheaders()
    conn.send(head)
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            conn.send(piece)
    conn.send(tail)
    r = conn.getresponse()
    body = r.read()
    if r.status != 201:
        sys.exit(f"upload failed: {r.status} {body[:300]!r}")
    return json.loads(body)["referenceId"]


def main():
    base, token, pid = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3])
    path = "/tmp/kartei-memory-200mb.png"
    size = png_file(path)
    mb = size / 1e6
    print(f"file: {SIDE}x{SIDE} PNG, {mb:.0f} MB")
    time.sleep(0.5)
    start = rss_kib(pid)
    with Peak(pid) as p:
        ref = upload(base, token, path)
    print(f"upload: resident {start/1024:.0f} MiB before, peak {p.peak/1024:.0f} MiB: +{(p.peak-start)/1024:.0f} MiB for a {mb:.0f} MB file")
    with Peak(pid) as p:
        for _ in range(1200):
            with urllib.request.urlopen(urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": f'{{ binary(referenceId: "{ref}") {{ status }} }}'}).encode(), headers={"Content-Type": "application/json"}), timeout=30) as r:
                status = json.load(r)["data"]["binary"]["status"]
            if status != "PROCESSING":
                break
            time.sleep(0.25)
    print(f"scaling (decodes the whole image, {SIDE}x{SIDE}x3 bytes): peak {p.peak/1024:.0f} MiB; status {status}")
    time.sleep(1)
    start = rss_kib(pid)
    received = 0
    with Peak(pid) as p:
        with urllib.request.urlopen(f"{base}/binary/{ref}", timeout=600) as r:
            while piece := r.read(1 << 20):
                received += len(piece)
    assert received == size, (received, size)
    print(f"serve: resident {start/1024:.0f} MiB before, peak {p.peak/1024:.0f} MiB: +{(p.peak-start)/1024:.0f} MiB for {received/1e6:.0f} MB sent")
    os.remove(path)


if __name__ == "__main__":
    main()
