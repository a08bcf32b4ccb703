#!/usr/bin/env python3
"""bench/plot_suite.py: a PNG of gemmkit/cuBLAS per shape of the shape suite (gemmkit_bench --only suite), one panel
per dtype, bars coloured by group, with each group's geometric mean in its label.

Usage: python3 bench/plot_suite.py DEFAULT.json [DEFAULT2.json ...] [--tuned TUNED.json ...] [-o suite.png]
DEFAULT.json: runs of the default plan (gemmkit_bench --only suite --tuning off; runs of different --groups are
joined); TUNED.json: runs after `gemmkit tune --suite`, drawn as markers over the bars. Needs matplotlib.
"""
import argparse
import json
import math
import pathlib
import sys


def suite_rows(paths):
    rows = []
    for path in paths:
        doc = json.loads(pathlib.Path(path).read_text())
        if "suite" not in doc:
            sys.exit(f"{path}: no 'suite' section (run gemmkit_bench --only suite)")
        rows += [r for r in doc["suite"]["rows"] if r.get("ok")]
    return rows


def key(row):
    return (row["dtype"], row["group"], row["m"], row["n"], row["k"])


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("default", nargs="+", help="suite JSON of the default plan (several: joined)")
    parser.add_argument("--tuned", nargs="*", default=[], help="suite JSON after tuning (markers)")
    parser.add_argument("-o", "--out", default="suite.png")
    args = parser.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = suite_rows(args.default)
    tuned = {key(r): r["ratio"] for r in suite_rows(args.tuned)} if args.tuned else {}
    dtypes = sorted({r["dtype"] for r in rows})
    groups = list(dict.fromkeys(r["group"] for r in rows))
    colours = {g: plt.cm.tab10(i % 10) for i, g in enumerate(groups)}
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(max(10, 0.32 * len(rows) / max(1, len(dtypes)) + 3),
                                                      4.2 * len(dtypes)), squeeze=False)
    for ax, dtype in zip(axes[:, 0], dtypes):
        mine = [r for r in rows if r["dtype"] == dtype]
        x = range(len(mine))
        ax.bar(x, [r["ratio"] for r in mine], color=[colours[r["group"]] for r in mine])
        if tuned:
            points = [(i, tuned[key(r)]) for i, r in enumerate(mine) if key(r) in tuned]
            ax.scatter([p[0] for p in points], [p[1] for p in points], marker="D", color="black", zorder=3,
                       label="tuned (gemmkit tune)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.95, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{r['m']}x{r['n']}x{r['k']}" for r in mine], rotation=75, fontsize=7)
        ax.set_ylabel("gemmkit / cuBLAS (speed)")
        ax.set_title(f"{dtype}: default plan vs cuBLAS (> 1: gemmkit faster)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours[g]) for g in groups if any(r["group"] == g for r in mine)]
        labels = [f"{g} (geomean {geomean([r['ratio'] for r in mine if r['group'] == g]):.3f})"
                  for g in groups if any(r["group"] == g for r in mine)]
        if tuned:
            handles.append(plt.Line2D([], [], marker="D", color="black", linestyle=""))
            labels.append("tuned")
        ax.legend(handles, labels, fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
