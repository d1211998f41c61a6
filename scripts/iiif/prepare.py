#!/usr/bin/env python3
"""Uploads the IIIF validator's test image to a running kartei server and
prints its reference id once it is served.

The image is drawn from the validator's own colour table (imported from the
installed iiif_validator package, not copied): 1000x1000 pixels, a 10x10 grid
of 100x100 squares, square (X, Y) in colorInfo[X][Y].

Usage: prepare.py BASE_URL TOKEN
"""
import contextlib
import io
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

from PIL import Image

# The validator package prints while it imports; keep stdout for the id alone.
with contextlib.redirect_stdout(io.StringIO()):
    from iiif_validator.validator import ValidationInfo


def test_image() -> bytes:
    colours = ValidationInfo().colorInfo
    img = Image.new("RGB", (1000, 1000))
    for x in range(10):
        for y in range(10):
            img.paste(colours[x][y], (x * 100, y * 100, x * 100 + 100, y * 100 + 100))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def upload(base: str, token: str, png: bytes, context: str = "iiif-validation") -> str:
    boundary = "kartei-" + uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"context\"\r\n\r\n{context}\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"test\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + png + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(
        f"{base}/binaries/upload",
        data=body,
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["referenceId"]


def main() -> None:
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    ref = upload(base, token, test_image())
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{base}/iiif/3/{ref}/info.json", timeout=5) as r:
                if r.status == 200:
                    print(ref)
                    return
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        time.sleep(0.1)
    sys.exit(f"reference {ref} was never served")


if __name__ == "__main__":
    main()
