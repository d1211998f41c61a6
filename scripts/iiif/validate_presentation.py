#!/usr/bin/env python3
"""Validates IIIF Presentation 3 documents against a JSON schema.

Usage: validate_presentation.py SCHEMA URL_OR_FILE...

SCHEMA is a local file (tests/data/iiif/presentation-3.schema.json is the
IIIF presentation-validator's schema). Each document is fetched when it
starts with http:// or https://, otherwise read from disk. Prints one line
per document; for a failure, the number of errors and the path and message
of the most relevant one (jsonschema's best_match, except that inside
oneOf/anyOf it follows the branch whose "type" matched). Exits 1 if any
document failed (or could not be read), 2 on bad usage. Like the IIIF
validator, formats ("uri") are not checked. Needs only the standard library
and jsonschema.
"""
import json
import sys
import urllib.request

from jsonschema.exceptions import relevance
from jsonschema.validators import validator_for

ACCEPT = 'application/ld+json;profile="http://iiif.io/api/presentation/3/context.json", application/json'


def load(src):
    if src.startswith(("http://", "https://")):
        req = urllib.request.Request(src, headers={"Accept": ACCEPT})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)
    with open(src, encoding="utf-8") as f:
        return json.load(f)


def wrong_branch(errors):
    """A oneOf/anyOf branch is for another kind of object when its "type"
    property (Manifest, Canvas, ...) or the JSON type itself did not match."""
    return any(
        (list(e.relative_path) == ["type"] and e.validator in ("pattern", "const", "enum", "not"))
        or (not e.relative_path and e.validator == "type")
        for e in errors)


def explain(err):
    """Like jsonschema's best_match, but inside oneOf/anyOf it skips the
    branches whose "type" did not match before taking the deepest one."""
    while err.context:
        branches = {}
        for e in err.context:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        live = [b for b in branches.values() if not wrong_branch(b)]
        # Of several, take the branch that got deepest (as best_match does).
        live.sort(key=lambda b: min(map(relevance, b)))
        if not live or (len(live) > 1 and min(map(relevance, live[0])) == min(map(relevance, live[1]))):
            return err
        err = max(live[0], key=relevance)
    return err


def json_path(parts):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    cls = validator_for(schema)  # follows "$schema" (draft-07 for IIIF 3)
    cls.check_schema(schema)
    validator = cls(schema)
    failed = False
    for src in argv[2:]:
        try:
            doc = load(src)
        except Exception as e:  # network, file or JSON error
            print(f"ERROR {src}: {type(e).__name__}: {e}")
            failed = True
            continue
        errors = list(validator.iter_errors(doc))
        kind = doc.get("type", "?") if isinstance(doc, dict) else type(doc).__name__
        if not errors:
            print(f"OK    {src} ({kind})")
            continue
        failed = True
        err = explain(max(errors, key=relevance))
        inst = repr(err.instance)
        msg = err.message.replace(inst, inst[:80] + "...") if len(inst) > 100 else err.message
        print(f"FAIL  {src} ({kind}): {len(errors)} error(s); best match at "
              f"{json_path(err.absolute_path)}: {msg}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
