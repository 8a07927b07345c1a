#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The placement sweep's runs split by the VM's regime.

This VM moves a cache line between its two CPUs in about 0.05-0.06 us in
one placement of its vCPUs and about 0.24 us in another, and switches
between them from one minute to the next, sometimes within a round of the
sweep: a ratio of two runs on either side of a switch is off by 3x. Every
program's figures are bimodal the same way, so each (size, program) is
split at the widest gap between its sorted values over the placements of
two CPUs, when that gap is wider than 2x (the regimes lie 2.3-4x apart for
every program and size here; a stray run 2x off is not a regime): the runs below it are the fast
regime, those above the slow one. A (size, program) without such a gap ran
in one regime only: all its runs take the regime most of their rounds'
floor runs were in (the floor's own runs, without a gap, the regime their
level says: a crossing under 0.12 us is the fast one). Medians and ratios
are then taken within a regime. Both ranks on one CPU is a regime of its
own.

usage: sweep_regimes.py RAW   (lines "cpus size lib round value")
"""
import statistics
import sys
from collections import defaultdict


# A one-way crossing under this (us) is the fast regime (about 0.05-0.06
# against 0.23-0.26): used only when the floor's runs show no gap.
FAST_FLOOR_MAX = 0.12


def gap_threshold(values):
    v = sorted(x for x in values if x > 0)
    if len(v) < 2:
        return None
    ratio, i = max((v[i + 1] / v[i], i) for i in range(len(v) - 1))
    return (v[i] * v[i + 1]) ** 0.5 if ratio > 2.0 else None


def main():
    runs = defaultdict(list)  # (cpus, size, lib) -> [(round, value)]
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) == 5:
            runs[(f[0], int(f[1]), f[2])].append((f[3], float(f[4])))
    placements = list(dict.fromkeys(k[0] for k in runs))
    sizes = sorted({k[1] for k in runs})
    libs = [l for l in ("floor", "weft", "before", "lf", "ucx") if any(k[2] == l for k in runs)]
    fsize = sizes[0]
    two = [p for p in placements if p.split(",")[0] != p.split(",")[1]]

    def lib_size(lib, s):
        return fsize if lib == "floor" else s

    # The threshold of each (size, lib) over all two-CPU placements.
    thr = {}
    for s in sizes:
        for lib in libs:
            vals = [v for p in two for _, v in runs.get((p, lib_size(lib, s), lib), [])]
            thr[(s, lib)] = gap_threshold(vals)

    # The regime of each round of each two-CPU placement, from its floor run.
    def floor_regime(p, rnd):
        t = thr.get((fsize, "floor"))
        for r, v in runs.get((p, fsize, "floor"), []):
            if r == rnd:
                return "fast" if v < (t if t is not None else FAST_FLOOR_MAX) else "slow"
        return None

    # Without a gap, one regime for all of a (size, lib)'s runs: the one
    # most of their rounds' floors were in.
    single = {}
    for (p, s, lib), rv in runs.items():
        if p in two and thr.get((s, lib)) is None:
            votes = [floor_regime(p, rnd) for rnd, _ in rv]
            single.setdefault((s, lib), []).extend(x for x in votes if x)
    single = {k: ("fast" if v.count("fast") >= v.count("slow") else "slow") for k, v in single.items()}

    def regime_of(s, lib, rnd, v):
        t = thr.get((s, lib))
        if t is not None:
            return "fast" if v < t else "slow"
        return single.get((s, lib))

    def med(p, s, lib, regime):
        vals = [v for rnd, v in runs.get((p, lib_size(lib, s), lib), [])
                if regime == "one CPU" or regime_of(lib_size(lib, s), lib, rnd, v) == regime]
        return (statistics.median(vals), len(vals)) if vals else (None, 0)

    def fmt(x):
        return "-" if x is None else ("%.4f" % x if x < 1000 else "%.0f" % x)

    def ratio(a, b):
        if a is None or b is None or b <= 0:
            return "-"
        r = a / b
        return "%.2f" % r if r >= 0.1 else "%.1e" % r

    head = "| CPUs | regime | size | " + " | ".join(
        {"floor": "floor", "weft": "weft", "before": "before", "lf": "libfabric", "ucx": "UCX"}[l] for l in libs)
    head += " | weft/floor | weft / better of libfabric, UCX |" + (" weft/before |" if "before" in libs else "")
    print(head)
    print("|" + "---|" * 3 + "---:|" * len(libs) + "---|---|" + ("---|" if "before" in libs else ""))
    for p in placements:
        same = p.split(",")[0] == p.split(",")[1]
        for regime in (["one CPU"] if same else ["fast", "slow"]):
            for s in sizes:
                m = {l: med(p, s, l, regime) for l in libs}
                if m["weft"][0] is None:
                    continue
                cells = []
                for l in libs:
                    v, n = m[l]
                    if l == "floor" and s != fsize:
                        cells.append("")
                    else:
                        cells.append("%s (%d)" % (fmt(v), n) if v is not None else "-")
                best = min((m[l][0] for l in ("lf", "ucx") if l in m and m[l][0] is not None), default=None)
                row = "| %s | %s | %d B | %s | %s | %s |" % (
                    p, regime, s, " | ".join(cells),
                    ratio(m["weft"][0], m["floor"][0]) if s == fsize else "", ratio(m["weft"][0], best))
                if "before" in libs:
                    row += " %s |" % ratio(m["weft"][0], m["before"][0])
                print(row)


if __name__ == "__main__":
    main()
