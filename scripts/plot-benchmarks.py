#!/usr/bin/env python3
"""Draws BENCHMARKS.md's plots from the raw outputs it cites, as SVG files in docs/plots/.

Needs: Python 3.9 or later and matplotlib (any 3.x; `pip install matplotlib`, for instance into
a virtual environment: `python3 -m venv /tmp/plots && /tmp/plots/bin/pip install matplotlib`).
Nothing else: no GPU, no build. Run from anywhere:

    python3 scripts/plot-benchmarks.py            # writes docs/plots/*.svg
    python3 scripts/plot-benchmarks.py --check    # reads the raw outputs, draws nothing
                                                  # (tests/docs.rs runs this)

One plot per headline table of BENCHMARKS.md, each read from that table's raw outputs under
docs/runs/ (the file is named next to each reader below):

- partitions.svg:     whole partitions, steady time a partition and the device floor of the same
                      run against log2 size (the `bench --json` reports);
- supraseal.svg:      snarkpipe against supraseal C2, seconds a proof, same process (the race's JSON);
- kernels-sppark.svg: G1 MSM and forward NTT against sppark, same process (the kernel race's JSON);
- filecoin.svg:       Filecoin's 2 KiB circuits against bellperson's CPU prover, same run (the
                      bench's summary lines);
- device-memory.svg:  keys on an H100 under device-memory caps, with the 2^27 floor of the same
                      call (the device call's text log and its first JSON report);
- msm.svg:            G1 and G2 MSMs, random scalars, against the floor of the same run (the
                      kernel bench's result tables; each size from the run BENCHMARKS.md names).

Every number comes from a raw file: there is no table of figures typed into this script. A
reader that does not find what it expects stops with the file and the pattern it looked for,
so a moved or reformatted run fails loudly instead of drawing something else. The SVGs are
written reproducibly (fixed hash salt, no date), so an unchanged input gives an unchanged file.
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "docs", "runs")
PLOTS = os.path.join(ROOT, "docs", "plots")
# Where the raw outputs are read from: docs/runs/ unless --runs says otherwise (for the test's
# twin, which points it at a folder without them).
RUNS_DIR = [RUNS]


class MissingFigure(Exception):
    pass


def run_file(path):
    full = os.path.join(RUNS_DIR[0], path)
    if not os.path.exists(full):
        raise MissingFigure(f"docs/runs/{path}: no such file")
    return full


def read_json(path):
    with open(run_file(path), encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        raise MissingFigure(f"docs/runs/{path}: empty")
    return json.loads(text)


def find(path, pattern, flags=re.M):
    """The first match of `pattern` in a raw file, or MissingFigure naming both."""
    with open(run_file(path), encoding="utf-8") as f:
        m = re.search(pattern, f.read(), flags)
    if not m:
        raise MissingFigure(f"docs/runs/{path}: no line matches {pattern!r}")
    return m


# --- readers: one per headline table -------------------------------------------------------

# Whole partitions, every size: the report BENCHMARKS.md's table links for each size.
PARTITION_REPORTS = {
    20: "2026-12-02b/p20.json",
    21: "2026-12-01h/p21.json",
    22: "2026-12-02b/p22.json",
    23: "2026-12-01h/p23.json",
    24: "2026-12-02b/p24.json",
    25: "2026-12-01h/p25.json",
    26: "2026-12-01h/s26-call3.json",
    27: "2026-12-01h/s27-call3.json",
}
VERIFIED_27 = "2026-12-03d/s27-setup.json"


def partitions():
    rows = []
    for log_n, path in sorted(PARTITION_REPORTS.items()):
        report = read_json(path)
        steady = report["steady_state"]["seconds_per_partition"]
        floor = report["device_floor"]["total_s"]
        rows.append((log_n, steady, floor, report["verified"]))
    verified = read_json(VERIFIED_27)
    return rows, (27, verified["steady_state"]["seconds_per_partition"], verified["verified"])


RACES = ["2026-12-03c/race-20-22-24.json", "2026-12-03c/race-26.json"]


def supraseal():
    rows = []
    for path in RACES:
        for size in read_json(path)["sizes"]:
            batch = size["batch"]
            rows.append((size["log_n"], batch["snarkpipe"]["median"], batch["supraseal"]["median"]))
    return sorted(rows)


KERNEL_RACE = "2026-12-03c/kernels.json"


def kernels_sppark():
    rows = []
    for size in read_json(KERNEL_RACE)["sizes"]:
        msm, ntt = size["msm_g1"], size["ntt_forward"]
        rows.append(
            (size["log_n"], msm["snarkpipe_median_ms"], msm["sppark_median_ms"], ntt["snarkpipe_median_ms"], ntt["sppark_median_ms"])
        )
    return sorted(rows)


FILECOIN_SUMMARY = "2026-12-02/call2-summary.txt"
FILECOIN_KINDS = [("porep", "PoRep"), ("snap", "SnapDeals"), ("winning-post", "Winning PoSt"), ("window-post", "Window PoSt")]


def filecoin():
    rows = []
    for kind, label in FILECOIN_KINDS:
        m = find(
            FILECOIN_SUMMARY,
            rf"^bench {re.escape(kind)} cuda .*? synthesis/part ([\d.]+) .*? gpu/part ([\d.]+) "
            rf"snarkpipe/part ([\d.]+) bellperson/part ([\d.]+)",
        )
        synthesis, gpu, total, bellperson = (float(x) for x in m.groups())
        rows.append((label, synthesis, gpu, total, bellperson))
    return rows


# Keys on the cards providers own: the runs of the table, in its order, from the two calls'
# text logs (each run a `== NAME` line and a result line), and the 2^27 floor of the first
# 2^27 run's report.
DEVICE_MEMORY_CALLS = ["2026-12-07/device-memory-call1.txt", "2026-12-07/device-memory-call2.txt"]
DEVICE_MEMORY_RUNS = [
    ("s27-hung-before", "2^27, 2 workers"),
    ("s27-one-worker", "2^27, 1 worker"),
    ("s27-48GiB", "2^27, --device-memory 48GiB"),
    ("s26-none", "2^26, 2 workers"),
    ("s26-48GiB", "2^26, --device-memory 48GiB"),
    ("s26-32GiB", "2^26, --device-memory 32GiB"),
    ("s26-24GiB", "2^26, --device-memory 24GiB"),
    ("s26-16GiB", "2^26, --device-memory 16GiB"),
]
DEVICE_MEMORY_FLOOR = "2026-12-07/s27-hung-before.json"


def device_memory():
    text = ""
    for path in DEVICE_MEMORY_CALLS:
        with open(run_file(path), encoding="utf-8") as f:
            text += f.read()
    rows = []
    for name, label in DEVICE_MEMORY_RUNS:
        # The last run of that name (a run repeated in the second call supersedes the first).
        runs = re.findall(rf"^== {re.escape(name)} .*\n\s+rc=(\d+) .*?steady ([\d.]+) s;.*?budget ([\d.]+) GB.*?key: ([^;]*)", text, re.M)
        if not runs:
            raise MissingFigure(f"{DEVICE_MEMORY_CALLS}: no run named {name}")
        rc, steady, budget, key = runs[-1]
        proved = rc == "0" and float(steady) > 0
        rows.append((label, float(steady) if proved else None, float(budget), key.strip()))
    floor = read_json(DEVICE_MEMORY_FLOOR)["device_floor"]["total_s"]
    return rows, floor


# MSM (G1 and G2): for each size, the run BENCHMARKS.md's table names, and the row of that
# run's result table it reads (the G2 rows of H1 and H2 are the three-blocks-an-SM build, the
# default since H3).
MSM_RUNS = {
    "G1": [
        (20, "2026-12-01g/bench-call2.md", "random"),
        (22, "2026-12-01g/bench-call2.md", "random"),
        (24, "2026-12-01h/bench-call4.log", "random"),
        (26, "2026-12-01h/bench-call2.log", "random"),
    ],
    "G2": [
        (20, "2026-12-01g/bench-call2.md", "random"),
        (22, "2026-12-01h/bench-call1.log", "random, G2 at three blocks an SM"),
        (24, "2026-12-01h/bench-call3.log", "random"),
        (26, "2026-12-01h/bench-call2.log", "random, G2 at three blocks an SM"),
    ],
}


def msm():
    curves = {}
    for curve, runs in MSM_RUNS.items():
        rows = []
        for log_n, path, variant in runs:
            m = find(path, rf"^\| {curve} MSM 2\^{log_n} {re.escape(variant)} \| ([\d.]+) ms \| ([\d.]+) ms \|")
            rows.append((log_n, float(m.group(1)), float(m.group(2))))
        curves[curve] = rows
    return curves


# --- drawing -------------------------------------------------------------------------------


def draw(figures):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "snarkpipe", "svg.fonttype": "none", "font.size": 9})
    os.makedirs(PLOTS, exist_ok=True)

    def save(fig, name, source):
        fig.text(0.01, 0.005, f"from docs/runs/{source}", fontsize=6, color="#666666")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        out = os.path.join(PLOTS, name)
        fig.savefig(out, format="svg", metadata={"Date": None})
        plt.close(fig)
        print(f"wrote {os.path.relpath(out, ROOT)}")

    def log2_axis(ax, sizes):
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"$2^{{{s}}}$" for s in sizes])
        ax.grid(True, which="both", alpha=0.3)

    # Whole partitions.
    rows, verified = figures["partitions"]
    sizes = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.plot(sizes, [r[1] for r in rows], "o-", color="#1565c0", label="snarkpipe, steady s/partition")
    ax.plot(sizes, [r[2] for r in rows], "s--", color="#9e9e9e", label="device floor, same run")
    ax.plot([verified[0]], [verified[1]], "D", color="#2e7d32", label=f"2^27 with a setup key, {verified[2]} verified")
    ax.set_yscale("log")
    ax.set_xlabel("partition (constraints)")
    ax.set_ylabel("seconds a partition")
    ax.set_title("Whole partitions, one H200 (2026-12-01/02; 2^27 random key)")
    log2_axis(ax, sizes)
    ax.legend()
    save(fig, "partitions.svg", "2026-12-01h, 2026-12-02b, 2026-12-03d (the table's reports)")

    # supraseal C2.
    rows = figures["supraseal"]
    sizes = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.plot(sizes, [r[1] for r in rows], "o-", color="#1565c0", label="snarkpipe")
    ax.plot(sizes, [r[2] for r in rows], "s-", color="#c62828", label="supraseal C2 (peer, same process)")
    for s, a, b in rows:
        ax.annotate(f"{b / a:.2f}×", (s, b), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("circuit size")
    ax.set_ylabel("seconds a proof (batch)")
    ax.set_ylim(top=max(r[2] for r in rows) * 3)
    ax.set_title("Whole proofs against supraseal C2, one H200 (2026-12-03)")
    log2_axis(ax, sizes)
    ax.legend()
    save(fig, "supraseal.svg", "2026-12-03c/race-20-22-24.json, race-26.json")

    # Kernels against sppark.
    rows = figures["kernels_sppark"]
    sizes = [r[0] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.0, 3.6))
    for ax, i, title in ((left, 1, "G1 MSM, random scalars"), (right, 3, "forward NTT")):
        ax.plot(sizes, [r[i] for r in rows], "o-", color="#1565c0", label="snarkpipe")
        ax.plot(sizes, [r[i + 1] for r in rows], "s-", color="#c62828", label="sppark (peer, same process)")
        ax.set_yscale("log")
        ax.set_xlabel("log n")
        ax.set_ylabel("ms (median of 5)")
        ax.set_title(title)
        log2_axis(ax, sizes)
        ax.legend()
    fig.suptitle("Kernels against sppark, one H200 (2026-12-03)")
    save(fig, "kernels-sppark.svg", KERNEL_RACE)

    # Filecoin.
    rows = figures["filecoin"]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = range(len(rows))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], [r[1] for r in rows], width, color="#90caf9", label="snarkpipe: synthesis (CPU)")
    ax.bar([x - width / 2 for x in xs], [r[2] for r in rows], width, bottom=[r[1] for r in rows], color="#1565c0", label="snarkpipe: GPU")
    ax.bar([x + width / 2 for x in xs], [r[4] for r in rows], width, color="#c62828", label="bellperson 0.27, 16 cores (peer, same run)")
    for x, r in zip(xs, rows):
        ax.annotate(f"{r[4] / r[3]:.1f}×", (x + width / 2, r[4]), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r[0] for r in rows])
    ax.set_yscale("log")
    ax.set_ylim(bottom=min(r[1] for r in rows) / 2)
    ax.set_ylabel("seconds a partition (log scale)")
    ax.set_title("Filecoin's 2 KiB circuits, one H200 (2026-12-02)")
    ax.legend(loc="upper right", fontsize=7)
    save(fig, "filecoin.svg", FILECOIN_SUMMARY)

    # Keys on an H100.
    rows, floor = figures["device_memory"]
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    ys = list(range(len(rows)))[::-1]
    for y, (label, steady, budget, key) in zip(ys, rows):
        if steady is None:
            ax.text(0.05, y, f"refused at once (budget {budget} GB)", va="center", fontsize=8, color="#c62828")
        else:
            ax.barh(y, steady, color="#1565c0" if label.startswith("2^27") else "#42a5f5")
            held = key.split(", streamed")[0].replace("no key resident", "key streamed whole")
            ax.text(steady + 0.05, y, f"{steady:.3f} s; budget {budget} GB; {held}", va="center", fontsize=7)
    ax.axvline(floor, color="#9e9e9e", linestyle="--", label=f"2^27 device floor, same call: {floor:.3f} s")
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("steady seconds a partition (random keys)")
    ax.set_xlim(0, max(r[1] or 0 for r in rows) * 2.2)
    ax.set_title("Keys on an H100 80 GB under device-memory caps (2026-12-07)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    save(fig, "device-memory.svg", "2026-12-07/device-memory-call1.txt, -call2.txt, s27-hung-before.json")

    # MSM against its floor.
    curves = figures["msm"]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colours = {"G1": "#1565c0", "G2": "#6a1b9a"}
    for curve, rows in curves.items():
        sizes = [r[0] for r in rows]
        ax.plot(sizes, [r[1] for r in rows], "o-", color=colours[curve], label=f"{curve} MSM, random scalars")
        ax.plot(sizes, [r[2] for r in rows], "s--", color=colours[curve], alpha=0.5, label=f"{curve} floor, same run")
    ax.set_yscale("log")
    ax.set_xlabel("points")
    ax.set_ylabel("ms")
    ax.set_title("MSM against its floor, one H200 (kernel bench, 2026-12-01)")
    log2_axis(ax, sorted({r[0] for rows in curves.values() for r in rows}))
    ax.legend()
    save(fig, "msm.svg", "2026-12-01g/bench-call2.md, 2026-12-01h/bench-call{1,2,3,4}.log")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="read the raw outputs and print the figures; draw nothing")
    parser.add_argument("--runs", default=RUNS, help="the folder of raw outputs (default: docs/runs/)")
    args = parser.parse_args()
    RUNS_DIR[0] = args.runs
    readers = {
        "partitions": partitions,
        "supraseal": supraseal,
        "kernels_sppark": kernels_sppark,
        "filecoin": filecoin,
        "device_memory": device_memory,
        "msm": msm,
    }
    figures = {}
    try:
        for name, reader in readers.items():
            figures[name] = reader()
    except MissingFigure as e:
        print(f"plot-benchmarks: {e}", file=sys.stderr)
        return 1
    if args.check:
        for name, value in figures.items():
            print(name, value)
        return 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot-benchmarks: needs matplotlib (pip install matplotlib); --check runs without it", file=sys.stderr)
        return 1
    draw(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
