#!/usr/bin/env python3
"""Check SKOS files with skosify and with SkoHub's SHACL shapes.

    python check.py [--format FMT] [-v] SHAPES FILE...

For each FILE (Turtle .ttl, RDF/XML .rdf/.owl/.xml, JSON-LD .jsonld/.json,
N-Triples .nt; or all files in the format given with --format):

  skosify  runs skosify.skosify() in-process with the defaults of the
           `skosify` command line (skosify.config()), capturing what it logs.
           Any record at WARNING or above fails the file, even where skosify
           says it "fixed" something: its fixes only change its own output.
  shacl    runs pyshacl.validate() with the SHAPES file (tests/data/skos/
           skohub.shacl.ttl), inference "none" (as SkoHub Vocabs'
           rdf-validate-shacl and the `shacl validate` of SkoHub's vocabulary
           CI). Any validation result fails the file, sh:Warning included,
           as in SkoHub's shapes CI (scripts/test.sh, `-l all`) and its
           vocabulary GitHub Action; --allow-shacl-warnings fails only on
           results of severity sh:Violation (like a SkoHub Vocabs build).

Prints one OK/FAIL line per file and check; exits 1 on any failure.
Needs skosify, pyshacl and rdflib (pip install skosify pyshacl).
"""

import argparse
import logging
import sys

import rdflib
from rdflib.namespace import SH
import pyshacl
import skosify

FORMATS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".rdf": "xml",
    ".owl": "xml",
    ".xml": "xml",
    ".jsonld": "json-ld",
    ".json": "json-ld",
    ".nt": "nt",
    ".n3": "n3",
}
ALIASES = {
    "ttl": "turtle",
    "rdfxml": "xml",
    "rdf/xml": "xml",
    "rdf": "xml",
    "jsonld": "json-ld",
    "ntriples": "nt",
}


def guess_format(path, forced):
    if forced:
        return ALIASES.get(forced.lower(), forced)
    for ext, fmt in FORMATS.items():
        if path.lower().endswith(ext):
            return fmt
    return None


class Collector(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def run_skosify(graph):
    """Return (problems, infos): formatted log lines at >= WARNING, < WARNING."""
    root = logging.getLogger()
    old_level, old_handlers = root.level, root.handlers[:]
    collector = Collector()
    root.handlers = [collector]  # a handler, so logging.warning() won't basicConfig()
    root.setLevel(logging.INFO)  # the CLI's level without --debug
    fmt = logging.Formatter("%(levelname)s: %(message)s")
    problems = []
    try:
        skosify.skosify(graph, **skosify.config())
    except SystemExit as e:  # skosify exits after logging.critical()
        problems.append("skosify exited (%s)" % e.code)
    except Exception as e:  # noqa: BLE001 - report, don't crash the run
        problems.append("skosify raised %s: %s" % (type(e).__name__, e))
    finally:
        root.handlers = old_handlers
        root.setLevel(old_level)
    lines = [(r.levelno, fmt.format(r)) for r in collector.records]
    problems = [l for lvl, l in lines if lvl >= logging.WARNING] + problems
    infos = [l for lvl, l in lines if lvl < logging.WARNING]
    return problems, infos


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", metavar="SHAPES", help="SHACL shapes (Turtle)")
    ap.add_argument("files", metavar="FILE", nargs="+")
    ap.add_argument("--format", help="rdflib format of every FILE "
                    "(turtle, xml, json-ld, nt; default: from the extension)")
    ap.add_argument("--inference", default="none",
                    help="pyshacl inference: none (default), rdfs, owlrl, both")
    ap.add_argument("--allow-shacl-warnings", action="store_true",
                    help="fail SHACL only on sh:Violation results")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also print skosify's INFO lines")
    args = ap.parse_args(argv)

    shapes = rdflib.Graph()
    try:
        shapes.parse(args.shapes, format=guess_format(args.shapes, None) or "turtle")
    except Exception as e:  # noqa: BLE001
        print("cannot read shapes %s: %s" % (args.shapes, e), file=sys.stderr)
        return 2

    failed = False
    for path in args.files:
        fmt = guess_format(path, args.format)
        graph = rdflib.Graph()
        try:
            if fmt is None:
                raise ValueError("unknown extension; use --format")
            graph.parse(path, format=fmt)
        except Exception as e:  # noqa: BLE001
            print("FAIL parse   %s: %s" % (path, e))
            failed = True
            continue

        problems, infos = run_skosify(graph)
        print("%s skosify %s" % ("FAIL" if problems else "OK  ", path))
        for line in problems:
            print("    " + line)
        if args.verbose:
            for line in infos:
                print("    (" + line + ")")
        failed |= bool(problems)

        try:
            conforms, report, text = pyshacl.validate(
                graph,
                shacl_graph=shapes,
                inference=args.inference,
                abort_on_first=False,
                allow_warnings=False,  # True would also let sh:or members
                meta_shacl=False,      # of severity sh:Warning pass inside
                advanced=False,        # the sh:or, unlike the SHACL spec
            )
            if args.allow_shacl_warnings and not conforms:
                conforms = (None, SH.resultSeverity, SH.Violation) not in report
        except Exception as e:  # noqa: BLE001
            conforms, text = False, "pyshacl raised %s: %s\n" % (type(e).__name__, e)
        print("%s shacl   %s" % ("OK  " if conforms else "FAIL", path))
        if not conforms:
            for line in text.rstrip("\n").split("\n"):
                print("    " + line)
        failed |= not conforms

    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
