#!/usr/bin/env python3
"""ab.py — two or more whole commands timed side by side, in alternating rounds, beside `cp` of
their input: the way to tell a change of a few percent from a VM's noise (on the 2-core VM `cp` of
the same GiB took 0.24 s in one hour and 0.50 s in another, so only runs made side by side, in the
same minutes, compare). Each round runs every variant once, in an order rotated round to round,
then `cp INPUT`; each process is timed whole (wall, and user+system CPU of the child).

    python3 bench/ab.py --rounds 24 --input /dev/shm/hq_e2e/raw_1g.h5 \\
        'before=/tmp/base/build/histeq_dist -q -i {in} -o {out} --force --device cpu' \\
        'after=build/histeq_dist -q -i {in} -o {out} --force --device cpu'

{in} is --input, {out} a path of the variant's own in --dir (default: the input's directory) with
the input's extension (ab_NAME.h5), removed at the end with cp's copy. It
prints each round, then per variant the median wall and CPU seconds and the ratio to cp's median,
and for every variant after the first its per-round wall ratio to the first: the median, and in
how many rounds it was below 1. Needs only Python 3."""
import argparse
import datetime
import os
import resource
import socket
import statistics
import subprocess
import sys
import time


def timed(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, shell=True, check=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--input", required=True)
    ap.add_argument("--dir", default=None)
    ap.add_argument("variants", nargs="+", metavar="NAME=COMMAND")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    if any(len(v) != 2 or not v[0] for v in variants) or len(variants) < 1:
        ap.error("each variant is NAME=COMMAND")
    out_dir = a.dir or os.path.dirname(os.path.abspath(a.input))
    ext = os.path.splitext(a.input)[1]
    outs = {name: os.path.join(out_dir, "ab_%s%s" % (name, ext)) for name in [n for n, _ in variants] + ["cp"]}
    print("# bench/ab.py --rounds %d --input %s (%s UTC, %s, %d CPUs)" % (
        a.rounds, a.input, datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        socket.gethostname(), os.cpu_count()))
    for name, cmd in variants:
        print("#   %s: %s" % (name, cmd))
    res = {name: [] for name, _ in variants}
    res["cp"] = []
    for i in range(a.rounds):
        k = i % len(variants)
        for name, cmd in variants[k:] + variants[:k]:
            res[name].append(timed(cmd.format(**{"in": a.input, "out": outs[name]})))
        res["cp"].append(timed("cp %s %s" % (a.input, outs["cp"])))
        print("round %2d  " % i + "  ".join("%s %.3f s" % (n, res[n][-1][0]) for n in res), flush=True)
    med = statistics.median
    cp = med(w for w, _ in res["cp"])
    print("\n| what | median wall s | median CPU s | x cp |\n|---|---|---|---|")
    for n, v in res.items():
        print("| %s | %.3f | %.3f | %.2f |" % (n, med(w for w, _ in v), med(c for _, c in v),
                                              med(w for w, _ in v) / cp))
    first = variants[0][0]
    for name, _ in variants[1:]:
        r = [b[0] / f[0] for f, b in zip(res[first], res[name])]
        print("%s/%s wall, per round: median %.3f, below 1 in %d of %d" % (
            name, first, med(r), sum(x < 1 for x in r), len(r)))
    for p in outs.values():
        if os.path.isfile(p):
            os.remove(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
