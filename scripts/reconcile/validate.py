#!/usr/bin/env python3
"""Checks a running reconciliation service against the W3C Entity
Reconciliation API JSON schemas (versions 0.2 and 1.0-draft).

Usage: validate.py SCHEMA_DIR BASE_URL [TEXT ...]
       validate.py --check-schemas SCHEMA_DIR

SCHEMA_DIR holds one folder per version (0.2/, 1.0-draft/) with the schemas
vendored from https://github.com/reconciliation-api/specs (see
tests/data/reconciliation/README.md). BASE_URL is the server root, e.g.
http://127.0.0.1:8080. Each TEXT becomes one reconciliation query of the
batches (default: "Weimar"); the first TEXT is also the suggest prefix.

Sends the requests of the REQUESTS table below, in order, and validates each
JSON answer against its schema with every "$ref" resolved offline from
SCHEMA_DIR. Prints one line per request: OK, FAIL (best error: JSON path and
message) or SKIP (a request that needs entity ids or property ids that no
earlier answer gave; see --ids/--props). Exits 1 if any request failed, 2 on
bad usage or broken schemas. --check-schemas only compiles every schema and
resolves every "$ref" (no server needed).

Like the specs' own test (ajv 6), schemas are read as JSON Schema draft-07;
formats ("uri") are not checked. Needs the standard library and jsonschema
(which brings referencing).
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

# --------------------------------------------------------------------------
# What to send. Edit here.
# --------------------------------------------------------------------------
# The service: all portals' (/reconcile) or one portal's
# (/reconcile/portals/ID), set by the environment variable RECONCILE_SERVICE.
V02 = os.environ.get("RECONCILE_SERVICE", "/reconcile")  # 0.2 endpoint (manifest, queries=, extend=)
V10 = f"{V02}/1.0"  # 1.0-draft root endpoint; its routes are fixed by the draft
TYPE = "Keyword"         # type id for queries and property proposals ("" = none)
LIMIT = 5


def batch_02(c):
    """0.2 reconciliation query batch: {"q0": {...}, ...} (sent as form field `queries`)."""
    q = {}
    for i, text in enumerate(c.texts):
        q[f"q{i}"] = {"query": text, "limit": LIMIT}
        if c.type:
            q[f"q{i}"].update(type=c.type, type_strict="should")  # as OpenRefine sends it
    return q


def batch_10(c):
    """1.0-draft reconciliation query batch: {"queries": [...]} (JSON body)."""
    queries = []
    for text in c.texts:
        query = {"conditions": [{"matchType": "name", "propertyValue": text}], "limit": LIMIT}
        if c.type:
            query["type"] = c.type
        queries.append(query)
    return {"queries": queries}


def extend_query(c, v):
    """Data extension query {"ids": [...], "properties": [{"id": ...}]} (same shape in both versions)."""
    return {"ids": c.need_ids(v), "properties": [{"id": p} for p in c.need_props(v)]}


# Each row: v (version = schema folder), name, method, path (relative to
# BASE_URL, or a function of the context returning a path or absolute URL),
# then at most one of
#   params  -> GET query string     form -> POST application/x-www-form-urlencoded
#   json    -> POST application/json
# (each a function of the context; form values that are not strings are sent
# as JSON text), and
#   req     request schema the payload must match (form: the single field's JSON value)
#   schema  response schema (None: not JSON, `expect` is the Content-Type checked instead)
#   after   function(ctx, request payload, answer) -> list of extra problems;
#           it may also remember ids for later rows.
def _after_query_02(c, sent, got):
    c.remember_ids("0.2", [r.get("id") for q in got.values() if isinstance(q, dict)
                           for r in q.get("result", []) if isinstance(r, dict)])
    sent = json.loads(sent["queries"])
    return [] if set(got) == set(sent) else [f"answer keys {sorted(got)} != query keys {sorted(sent)}"]


def _after_query_10(c, sent, got):
    results = got.get("results", [])
    c.remember_ids("1.0-draft", [r.get("id") for q in results if isinstance(q, dict)
                                 for r in q.get("candidates", []) if isinstance(r, dict)])
    n = len(sent["queries"])
    return [] if len(results) == n else [f"{len(results)} results for {n} queries"]


def _after_props(v, key):
    def after(c, sent, got):
        c.remember_props(v, [p.get("id") for p in got.get(key, []) if isinstance(p, dict)])
        return []
    return after


def _manifest(v):
    def after(c, sent, got):
        c.manifest[v] = got
        return []
    return after


def _preview_02(c):
    tpl = (c.manifest.get("0.2") or {}).get("preview", {}).get("url")
    if not tpl:
        raise Skip("manifest has no preview")
    return tpl.replace("{{id}}", urllib.parse.quote(c.need_ids("0.2")[0], safe=""))


def _preview_10(c):
    if "preview" not in (c.manifest.get("1.0-draft") or {}):
        raise Skip("manifest has no preview")
    return f"{V10}/preview?" + urllib.parse.urlencode({"id": c.need_ids("1.0-draft")[0]})


REQUESTS = [
    # ---- 0.2 ---------------------------------------------------------------
    dict(v="0.2", name="manifest", method="GET", path=V02,
         schema="manifest.json", after=_manifest("0.2")),
    dict(v="0.2", name="suggest/entity", method="GET", path=f"{V02}/suggest/entity",
         params=lambda c: {"prefix": c.prefix}, schema="suggest-entities-response.json"),
    dict(v="0.2", name="suggest/type", method="GET", path=f"{V02}/suggest/type",
         params=lambda c: {"prefix": c.prefix}, schema="suggest-types-response.json"),
    dict(v="0.2", name="suggest/property", method="GET", path=f"{V02}/suggest/property",
         params=lambda c: {"prefix": c.prefix}, schema="suggest-properties-response.json",
         after=_after_props("0.2", "result")),
    dict(v="0.2", name="queries", method="POST", path=V02,
         form=lambda c: {"queries": batch_02(c)}, req="reconciliation-query-batch.json",
         schema="reconciliation-result-batch.json", after=_after_query_02),
    dict(v="0.2", name="properties", method="GET", path=f"{V02}/properties",
         params=lambda c: {"type": c.type}, schema="data-extension-property-proposal.json",
         after=_after_props("0.2", "properties")),
    dict(v="0.2", name="extend", method="POST", path=V02,
         form=lambda c: {"extend": extend_query(c, "0.2")}, req="data-extension-query.json",
         schema="data-extension-response.json"),
    dict(v="0.2", name="preview", method="GET", path=_preview_02, schema=None, expect="text/html"),
    # ---- 1.0-draft (routes relative to the root endpoint V10) ---------------
    dict(v="1.0-draft", name="manifest", method="GET", path=V10,
         schema="manifest.json", after=_manifest("1.0-draft")),
    dict(v="1.0-draft", name="suggest/entity", method="GET", path=f"{V10}/suggest/entity",
         params=lambda c: {"prefix": c.prefix, "limit": LIMIT}, schema="suggest-entities-response.json"),
    dict(v="1.0-draft", name="suggest/type", method="GET", path=f"{V10}/suggest/type",
         params=lambda c: {"prefix": c.prefix, "limit": LIMIT}, schema="suggest-types-response.json"),
    dict(v="1.0-draft", name="suggest/property", method="GET", path=f"{V10}/suggest/property",
         params=lambda c: {"prefix": c.prefix, "limit": LIMIT}, schema="suggest-properties-response.json",
         after=_after_props("1.0-draft", "result")),
    dict(v="1.0-draft", name="match", method="POST", path=f"{V10}/match",
         json=batch_10, req="reconciliation-query-batch.json",
         schema="reconciliation-result-batch.json", after=_after_query_10),
    dict(v="1.0-draft", name="extend/propose", method="GET", path=f"{V10}/extend/propose",
         params=lambda c: {"type": c.type, "limit": LIMIT}, schema="data-extension-property-proposal.json",
         after=_after_props("1.0-draft", "properties")),
    dict(v="1.0-draft", name="extend", method="POST", path=f"{V10}/extend",
         json=lambda c: extend_query(c, "1.0-draft"), req="data-extension-query.json",
         schema="data-extension-response.json"),
    dict(v="1.0-draft", name="preview", method="GET", path=_preview_10, schema=None, expect="text/html"),
]
ORIGIN = "http://reconcile-validator.invalid"  # sent as Origin; CORS is a MUST in both versions


# --------------------------------------------------------------------------
# Machinery.
# --------------------------------------------------------------------------
class Skip(Exception):
    pass


class Ctx:
    def __init__(self, texts, type_, ids, props):
        self.texts, self.prefix, self.type = texts, texts[0], type_
        self.ids = {v: list(ids) for v in ("0.2", "1.0-draft")}
        self.props = {v: list(props) for v in ("0.2", "1.0-draft")}
        self.manifest = {}

    @staticmethod
    def _add(store, values):
        for x in values:
            if isinstance(x, str) and x not in store and len(store) < 3:
                store.append(x)

    def remember_ids(self, v, ids):
        self._add(self.ids[v], ids)

    def remember_props(self, v, props):
        self._add(self.props[v], props)

    def need_ids(self, v):
        if not self.ids[v]:
            raise Skip("no entity ids (no candidates came back; pass --ids)")
        return self.ids[v]

    def need_props(self, v):
        if not self.props[v]:
            raise Skip("no property ids (no proposals or suggestions came back; pass --props)")
        return self.props[v]


def load_version(folder):
    """Loads every schema of one version; returns ({file name: schema}, registry).
    The registry maps each schema's "$id" (trailing "#" dropped) to it, which is
    where relative refs ("type.json", "lang.json") and the absolute
    "http://swagger.io/v2/schema.json#/..." ref land, so nothing is fetched."""
    schemas, resources, ids = {}, [], {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            schema = json.load(f)
        uri = schema["$id"].rstrip("#")
        if uri in ids:
            raise ValueError(f"{folder}: {name} and {ids[uri]} share $id {uri}")
        ids[uri] = name
        schemas[name] = schema
        # "$schema" is "http://json-schema.org/schema#" (no draft named): read as draft-07.
        resources.append((uri, Resource.from_contents(schema, default_specification=DRAFT7)))
    return schemas, Registry().with_resources(resources).crawl()


def refs(node):
    if isinstance(node, dict):
        for k, val in node.items():
            if k == "$ref" and isinstance(val, str):
                yield val
            else:
                yield from refs(val)
    elif isinstance(node, list):
        for val in node:
            yield from refs(val)


def check_schemas(schema_dir, versions, verbose):
    """Compiles every schema and resolves every $ref. Returns (loaded, problems)."""
    loaded, problems = {}, []
    for v in versions:
        try:
            schemas, registry = load_version(os.path.join(schema_dir, v))
        except (OSError, ValueError, KeyError) as e:
            problems.append(f"{v}: {type(e).__name__}: {e}")
            continue
        loaded[v] = (schemas, registry)
        for name, schema in schemas.items():
            try:
                Draft7Validator.check_schema(schema)
                resolver = registry.resolver(base_uri=schema["$id"].rstrip("#"))
                n = 0
                for ref in refs(schema):
                    resolver.lookup(ref)
                    n += 1
                if verbose:
                    print(f"OK   {v:<9} {name} ({n} refs resolved)")
            except Exception as e:  # SchemaError, Unresolvable, PointerToNowhere
                problems.append(f"{v}/{name}: {type(e).__name__}: {e}")
                print(f"FAIL {v:<9} {name}: {type(e).__name__}: {e}")
    return loaded, problems


def json_path(parts):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def schema_errors(loaded, v, name, doc):
    schemas, registry = loaded[v]
    errors = list(Draft7Validator(schemas[name], registry=registry).iter_errors(doc))
    if not errors:
        return None
    err = best_match(errors)
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{json_path(err.absolute_path)}: {err.message[:300]}{more}"


def send(base, row, c, timeout):
    """Builds and sends one request; returns (label, payload, status, headers, body)."""
    path = row["path"](c) if callable(row["path"]) else row["path"]
    url = path if path.startswith(("http://", "https://")) else base + path
    headers = {"Accept": "application/json" if row.get("schema") else "text/html", "Origin": ORIGIN}
    data, payload, how = None, None, ""
    if "params" in row:
        url += "?" + urllib.parse.urlencode(row["params"](c))
    elif "form" in row:
        payload = {k: (val if isinstance(val, str) else json.dumps(val)) for k, val in row["form"](c).items()}
        data = urllib.parse.urlencode(payload).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        how = " [form " + ",".join(payload) + "]"
    elif "json" in row:
        payload = row["json"](c)
        data = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
        how = " [json]"
    label = f"{row['method']} {url[len(base):] if url.startswith(base) else url}{how}"
    req = urllib.request.Request(url, data=data, headers=headers, method=row["method"])
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return label, payload, resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return label, payload, e.code, e.headers, e.read()


def run_row(base, row, c, loaded, args):
    """Returns (status word, label, detail)."""
    v = row["v"]
    try:
        label, payload, status, headers, body = send(base, row, c, args.timeout)
    except Skip as e:
        return "SKIP", f"{row['method']} {row['name']}", str(e)
    except (urllib.error.URLError, OSError) as e:
        return "FAIL", f"{row['method']} {row['name']}", f"{type(e).__name__}: {e}"
    problems = []
    if row.get("req"):  # the validator's own request must match the spec too
        sent = json.loads(next(iter(payload.values()))) if "form" in row else payload
        bad = schema_errors(loaded, v, row["req"], sent)
        if bad:
            problems.append(f"request does not match {row['req']}: {bad}")
    if status != 200:
        snippet = body[:200].decode("utf-8", "replace").replace("\n", " ")
        return "FAIL", label, f"HTTP {status}: {snippet}"
    ctype = headers.get("Content-Type", "")
    if not args.no_cors and not headers.get("Access-Control-Allow-Origin"):
        problems.append("no Access-Control-Allow-Origin (CORS is required)")
    if row.get("schema") is None:
        if row.get("expect") and row["expect"] not in ctype:
            problems.append(f"Content-Type {ctype!r}, expected {row['expect']}")
        return ("FAIL" if problems else "OK"), label, "; ".join(problems)
    if "json" not in ctype:
        problems.append(f"Content-Type {ctype!r} is not JSON")
    try:
        doc = json.loads(body)
    except ValueError as e:
        return "FAIL", label, "; ".join(problems + [f"invalid JSON: {e}"])
    bad = schema_errors(loaded, v, row["schema"], doc)
    if bad:
        problems.append(bad)
    if row.get("after") and isinstance(doc, dict):
        try:
            problems += row["after"](c, payload, doc)
        except Exception as e:  # a malformed answer the schema let through
            problems.append(f"{type(e).__name__} while reading the answer: {e}")
    return ("FAIL" if problems else "OK"), f"{label} -> {row['schema']}", "; ".join(problems)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s SCHEMA_DIR BASE_URL [TEXT ...] | %(prog)s --check-schemas SCHEMA_DIR")
    ap.add_argument("schema_dir")
    ap.add_argument("base_url", nargs="?")
    ap.add_argument("texts", nargs="*", help='query texts (default: "Weimar")')
    ap.add_argument("--check-schemas", action="store_true", help="only compile schemas and resolve refs")
    ap.add_argument("--only", action="append", choices=["0.2", "1.0-draft"], help="test only this version")
    ap.add_argument("--type", default=TYPE, help=f"type id for queries and proposals (default {TYPE!r}; '' = none)")
    ap.add_argument("--ids", action="append", default=[], help="entity id for extend/preview (repeatable)")
    ap.add_argument("--props", action="append", default=[], help="property id for extend (repeatable)")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--no-cors", action="store_true", help="do not require Access-Control-Allow-Origin")
    args = ap.parse_args(argv[1:])
    versions = args.only or sorted({r["v"] for r in REQUESTS})
    if not args.base_url and not args.check_schemas:
        ap.error("BASE_URL is required unless --check-schemas")

    loaded, problems = check_schemas(args.schema_dir, versions, args.check_schemas)
    if problems:
        print(f"{len(problems)} schema problem(s)", file=sys.stderr)
        return 2
    if args.check_schemas:
        return 0
    base = args.base_url.rstrip("/")
    c = Ctx(args.texts or ["Weimar"], args.type, args.ids, args.props)
    counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
    for row in REQUESTS:
        if row["v"] not in versions:
            continue
        word, label, detail = run_row(base, row, c, loaded, args)
        counts[word] += 1
        print(f"{word:<4} {row['v']:<9} {row['name']:<16} {label}" + (f": {detail}" if detail else ""))
    print(f"{counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
