#!/usr/bin/env python3
"""Deterministic input files for the ingest benchmarks (scripts/bench.sh).

    bench_data.py vocabulary N   > vocabulary.ndjson   # 1 portal, 20 categories, N keywords
    bench_data.py assignments N  > assignments.ndjson  # N machine suggestions over that vocabulary
    bench_data.py assignments-csv N > objects_keywords.csv  # the same rows as objects_keywords columns, for cqlsh COPY
    bench_data.py suggestions N  > dewiki.ndjson       # N image suggestions, 5 per page
    bench_data.py suggestions-csv N DATASET > s.csv    # the same rows as suggestions columns, for cqlsh COPY
    bench_data.py pg-categories 0 > categories.csv     # the vocabulary's categories, for PostgreSQL COPY (scripts/peer/schema.sql)
    bench_data.py pg-keywords N > keywords.csv         # its N keywords
    bench_data.py pg-assignments N [mix] > assignments.csv  # the N assignments as import-assignments --creator bench
                                                       # stores them (all AUTOSUGGESTED), or with mixed_status's statuses

The assignments use keywords k-00000 .. k-(K-1) with K = 2,000, so the
vocabulary file must hold at least 2,000 keywords.
"""

import csv
import json
import sys

PORTAL = "c-bench"
CHILDREN = [f"c-bench-{i:02}" for i in range(20)]
KEYWORDS = 2000
WORDS = ["Burg", "Fluss", "Kirche", "Markt", "Hafen", "Garten", "Brücke", "Schloss",
         "Mühle", "Turm", "Straße", "Platz", "Dorf", "Wald", "Berg", "See"]


def vocabulary(n):
    out = sys.stdout
    out.write(json.dumps({"type": "category", "id": PORTAL, "parentId": None,
                          "label": "Bench-Portal"}) + "\n")
    for i, c in enumerate(CHILDREN):
        out.write(json.dumps({"type": "category", "id": c, "parentId": PORTAL,
                              "label": f"Bereich {i}"}) + "\n")
    for i in range(n):
        out.write(json.dumps(keyword(i), ensure_ascii=False) + "\n")


def keyword(i):
    return {
        "type": "keyword", "id": f"k-{i:05}",
        "label": f"{WORDS[i % len(WORDS)]} {WORDS[(i // 16) % len(WORDS)]} {i}",
        "synonyms": [f"{WORDS[(i + 3) % len(WORDS)]}-{i}"],
        "categoryIds": [CHILDREN[i % len(CHILDREN)]],
        "createdAt": "2026-01-01T00:00:00Z",
    }


def assignment(i):
    k = (i * 7919) % KEYWORDS
    return {
        "portalId": PORTAL,
        # Spread over the id space, three keywords per object.
        "ddbId": f"DDB{(i // 3 * 2654435761) % 10_000_000_000:010}",
        "keywordId": f"k-{k:05}",
        "childCategoryId": CHILDREN[k % len(CHILDREN)],
        "confidence": round(((i * 37) % 100) / 100, 2),
    }


def assignments(n):
    out = sys.stdout
    for i in range(n):
        out.write(json.dumps(assignment(i)) + "\n")


def assignments_csv(n):
    # bucket is the service's hash of the ddb id; COPY only needs a valid int.
    out = sys.stdout
    for i in range(n):
        a = assignment(i)
        out.write(",".join([
            a["portalId"], str(i % 32), a["ddbId"], a["keywordId"], "bench",
            "AUTOSUGGESTED", a["childCategoryId"], "MACHINE",
            "2026-12-03T00:00:00Z", "2026-12-03T00:00:00Z", str(a["confidence"]),
        ]) + "\n")


# The same data for the peer bench's PostgreSQL (scripts/peer/schema.sql),
# as CSV for COPY ... WITH (FORMAT csv).
def pg_categories(_n):
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow([PORTAL, "", "Bench-Portal"])  # "" is NULL in COPY's CSV
    for i, c in enumerate(CHILDREN):
        w.writerow([c, PORTAL, f"Bereich {i}"])


def pg_keywords(n):
    w = csv.writer(sys.stdout, lineterminator="\n")
    for i in range(n):
        k = keyword(i)
        w.writerow([k["id"], k["label"], "{" + ",".join(f'"{s}"' for s in k["synonyms"]) + "}",
                    k["categoryIds"][0], k["createdAt"]])


# A curation under way: 60 % still AUTOSUGGESTED, 20 % ACCEPTED, 10 % each
# REJECTED and PUBLISHED, spread over the id space (the peer bench's --mix).
MIX = ["AUTOSUGGESTED"] * 6 + ["ACCEPTED"] * 2 + ["REJECTED", "PUBLISHED"]


def mixed_status(i):
    return MIX[(i * 7) % 10]


def pg_assignments(n, mix=False):
    # What `kartei import-assignments --creator bench` stores: type MACHINE,
    # status AUTOSUGGESTED (README, "Assignments import format").
    w = csv.writer(sys.stdout, lineterminator="\n")
    for i in range(n):
        a = assignment(i)
        w.writerow([a["portalId"], a["ddbId"], a["keywordId"], "bench",
                    mixed_status(i) if mix else "AUTOSUGGESTED",
                    a["childCategoryId"], "MACHINE", "2026-12-03T00:00:00Z",
                    "2026-12-03T00:00:00Z", a["confidence"]])


def suggestion(i):
    page = i // 5
    return {
        "page_id": page, "image": f"File_{i:08}.jpg", "origin_wiki": "commonswiki",
        "confidence": round(((i * 31) % 100) / 100, 2),
        "found_on": ["enwiki", "frwiki"], "kind": ["istype-wikidata-image"],
        "page_rev": 1000 + page, "section_heading": None, "section_index": None,
        "page_qid": f"Q{page + 1}",
    }


def suggestions(n):
    out = sys.stdout
    for i in range(n):
        out.write(json.dumps(suggestion(i)) + "\n")


def suggestions_csv(n, dataset):
    # Columns: wiki, page_id, id, image, origin_wiki, confidence, found_on, kind,
    # page_rev, section_heading, section_index, page_qid (cqlsh's list syntax).
    out = sys.stdout
    for i in range(n):
        s = suggestion(i)
        out.write(",".join([
            "benchwiki", str(s["page_id"]), dataset, s["image"], s["origin_wiki"],
            str(s["confidence"]), '"[\'enwiki\', \'frwiki\']"', '"[\'istype-wikidata-image\']"',
            str(s["page_rev"]), "", "", s["page_qid"],
        ]) + "\n")


if __name__ == "__main__":
    kind, n = sys.argv[1], int(sys.argv[2])
    if kind == "suggestions-csv":
        suggestions_csv(n, sys.argv[3])
    elif kind == "pg-assignments":
        pg_assignments(n, sys.argv[3:] == ["mix"])
    else:
        {"vocabulary": vocabulary, "assignments": assignments,
         "assignments-csv": assignments_csv, "suggestions": suggestions,
         "pg-categories": pg_categories, "pg-keywords": pg_keywords,
         "pg-assignments": pg_assignments}[kind](n)
