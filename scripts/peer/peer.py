#!/usr/bin/env python3
"""Helpers of the peer bench (scripts/bench-peer.sh).

    peer.py free-port                      a free TCP port on 127.0.0.1
    peer.py wait URL SECONDS PID           until URL answers a POST of {__typename} (PID must stay alive)
    peer.py post URL BODYFILE              POST the body, print the answer; exit 1 on HTTP or GraphQL errors
    peer.py page KIND < answer.json        the page as JSON lines [ddbId, label] (KIND kartei or postgraphile)
    peer.py cpu PID...                     CPU seconds (utime+stime, and cutime+cstime) of the processes
    peer.py tree PID                       PID and every descendant process (one per line)
    peer.py rss PID                        VmRSS of a process in KiB
    peer.py pss PID...                     the sum of their Pss in KiB (shared pages counted once)
    peer.py mix URL TOKEN N                curate kartei's N imported assignments into bench_data.py's
                                           mixed_status as an editor would (transitions, one release run)
"""

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def wait(url, seconds, pid):
    end = time.monotonic() + float(seconds)
    last = None
    while time.monotonic() < end:
        if not os.path.exists(f"/proc/{pid}"):
            sys.exit(f"peer.py: the server (pid {pid}) exited before it answered at {url}")
        try:
            status, body = post(url, b'{"query":"{__typename}"}', timeout=5)
            if status == 200 and b'"__typename"' in body:
                return
            last = f"HTTP {status}: {body[:200]!r}"
        except (OSError, urllib.error.URLError) as e:
            last = str(e)
        time.sleep(0.2)
    sys.exit(f"peer.py: no answer from {url} within {seconds} s ({last})")


def post_cmd(url, path):
    with open(path, "rb") as f:
        body = f.read()
    try:
        status, answer = post(url, body)
    except urllib.error.HTTPError as e:
        sys.exit(f"peer.py: {url}: HTTP {e.code}: {e.read()[:500]!r}")
    doc = json.loads(answer)
    if doc.get("errors") or not doc.get("data"):
        sys.exit(f"peer.py: {url}: {answer[:500]!r}")
    sys.stdout.write(answer.decode() + "\n")


def page(kind):
    data = json.load(sys.stdin)["data"]
    conn = data["assignments"] if kind == "kartei" else data["allAssignments"]
    for edge in conn["edges"]:
        n = edge["node"]
        kw = n["keyword"] if kind == "kartei" else n["keywordByKeywordId"]
        print(json.dumps([n["ddbId"], kw["label"] if kw else None], ensure_ascii=False))


def mix(url, token, n):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import bench_data

    def gql(query, variables):
        body = json.dumps({"query": query, "variables": variables}).encode()
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=600) as r:
            doc = json.load(r)
        if doc.get("errors"):
            sys.exit(f"peer.py mix: {json.dumps(doc['errors'])[:500]}")
        return doc["data"]

    def keys(status):
        out = []
        for i in range(int(n)):
            if bench_data.mixed_status(i) == status:
                a = bench_data.assignment(i)
                out.append({"portalId": a["portalId"], "ddbId": a["ddbId"],
                            "keywordId": a["keywordId"], "creator": "bench"})
        return out

    def move(ks, to):
        q = ("mutation($k: [AssignmentKeyInput!]!, $to: AssignmentStatus!) {"
             " transitionAssignments(expected: AUTOSUGGESTED, to: $to, keys: $k) { applied error { code } } }")
        for c in range(0, len(ks), 500):
            res = gql(q, {"k": ks[c:c + 500], "to": to})["transitionAssignments"]
            bad = [r for r in res if not r["applied"]]
            if bad:
                sys.exit(f"peer.py mix: {len(bad)} transitions to {to} not applied: {bad[:3]}")

    # PUBLISHED goes through ACCEPTED and a release run, before the rows that
    # stay ACCEPTED are accepted.
    move(keys("PUBLISHED"), "ACCEPTED")
    gql("mutation($p: ID!) { runRelease(portalId: $p) { __typename } }", {"p": bench_data.PORTAL})
    move(keys("ACCEPTED"), "ACCEPTED")
    move(keys("REJECTED"), "REJECTED")


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces and parentheses: split after the last ')'.
        return f.read().rsplit(")", 1)[1].split()


def cpu(pids):
    hz = os.sysconf("SC_CLK_TCK")
    ticks = 0
    for pid in pids:
        try:
            f = stat(pid)
        except FileNotFoundError:
            continue
        # Fields 14-17 (utime stime cutime cstime) are 11-14 after the name's ')'.
        ticks += sum(int(x) for x in f[11:15])
    print(f"{ticks / hz:.2f}")


def tree(root):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                children.setdefault(int(stat(d)[1]), []).append(int(d))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    out, todo = [], [int(root)]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    print("\n".join(map(str, out)))


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def pss(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    print(total)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "free-port":
        print(free_port())
    elif cmd == "wait":
        wait(*args)
    elif cmd == "post":
        post_cmd(*args)
    elif cmd == "page":
        page(*args)
    elif cmd == "cpu":
        cpu(args)
    elif cmd == "tree":
        tree(args[0])
    elif cmd == "rss":
        print(status_field(args[0], "VmRSS"))
    elif cmd == "pss":
        pss(args)
    elif cmd == "mix":
        mix(*args)
    else:
        sys.exit(__doc__)
