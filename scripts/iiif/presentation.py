#!/usr/bin/env python3
"""Gives a running kartei server one object for the IIIF Presentation checks:
a portal with a keyword (with a GND concept), two images uploaded under the
object's ddb id, and the keyword suggested by a machine and accepted by an
editor. Prints the manifest's URL and the portal collection's URL, one per
line. The object's catalogue record comes from `kartei import-objects`
(iiif-validate.sh runs it beside the server).

Usage: presentation.py BASE_URL ADMIN_TOKEN MACHINE_TOKEN EDITOR_TOKEN DDB_ID
"""
import io
import json
import sys
import time
import urllib.error
import urllib.request

from PIL import Image

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from prepare import upload  # noqa: E402


def gql(base: str, token: str, query: str, variables: dict) -> dict:
    req = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        answer = json.load(r)
    if answer.get("errors"):
        sys.exit(f"{query}: {answer['errors']}")
    return answer["data"]


def jpeg(w: int, h: int) -> bytes:
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 7) % 256, (y * 5) % 256, 128) for y in range(h) for x in range(w)])
    out = io.BytesIO()
    img.save(out, format="JPEG")
    return out.getvalue()


def main() -> None:
    base, admin, machine, editor, ddb = sys.argv[1].rstrip("/"), *sys.argv[2:6]
    category = "mutation($i: UpsertCategoryInput!) { upsertCategory(input: $i) { id } }"
    gql(base, admin, category, {"i": {"id": "iiif-portal", "label": "IIIF-Prüfportal"}})
    gql(base, admin, category, {"i": {"id": "iiif-places", "parentId": "iiif-portal", "label": "Orte"}})
    gql(base, admin, "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { id } }", {
        "i": {"id": "iiif-weimar", "label": "Weimar", "categoryIds": ["iiif-places"],
              "primaryGndUri": "https://d-nb.info/gnd/4065105-8", "synonyms": []}})
    refs = [upload(base, machine, jpeg(w, h), context=ddb) for (w, h) in [(1600, 1200), (600, 800)]]
    gql(base, machine, "mutation($i: SuggestAssignmentInput!) { suggestAssignment(input: $i) { status } }", {
        "i": {"portalId": "iiif-portal", "ddbId": ddb, "keywordId": "iiif-weimar",
              "childCategoryId": "iiif-places", "confidence": 0.9}})
    gql(base, editor, "mutation($k: AssignmentKeyInput!) { transitionAssignment(key: $k, expected: AUTOSUGGESTED, to: ACCEPTED) { status } }", {
        "k": {"portalId": "iiif-portal", "ddbId": ddb, "keywordId": "iiif-weimar", "creator": "iiif-machine"}})
    for ref in refs:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"{base}/iiif/3/{ref}/info.json", timeout=5):
                    break
            except urllib.error.HTTPError as e:
                if e.code != 404:
                    raise
            time.sleep(0.1)
        else:
            sys.exit(f"reference {ref} was never served")
    print(f"{base}/iiif/3/manifest/{ddb}")
    print(f"{base}/iiif/3/collection/iiif-portal")


if __name__ == "__main__":
    main()
