"""peers_plot.py - the PNG of bench/peers.py's table (run by peers.py with the peers venv's python).

    python bench/peers_plot.py REPORT.json OUT.png

One panel per workload: for each method that ran, its steady blocking time, time to memory
commit and load (seconds, slowest rank, log scale), with its commit ratio to tierckpt (THREAD).
"""
from __future__ import annotations

import json
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, out: str) -> None:
    rep = json.load(open(src))
    wls = [(k, v) for k, v in rep["workloads"].items() if "methods" in v]
    fig, axes = plt.subplots(len(wls), 1, figsize=(12, 4.8 * len(wls)), squeeze=False)
    for ax, (wl, res) in zip(axes[:, 0], wls):
        ms = [(n, m) for n, m in res["methods"].items() if m["steady_commit_s"]]
        x = range(len(ms))
        for j, (key, label) in enumerate((("steady_blocking_s", "blocking"), ("steady_commit_s", "memory commit"),
                                          ("steady_load_s", "load"))):
            ax.bar([i + (j - 1) * 0.27 for i in x], [m[key] or 0 for _, m in ms], 0.27, label=label)
        for i, (_, m) in enumerate(ms):
            r = m.get("vs_tierckpt_thread", {}).get("steady_commit_s")
            txt = f"{r:.2f}x" if r else ""
            if m["status"] != "ok":
                txt += " FAILED"
            ax.annotate(txt, (i, m["steady_commit_s"]), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(x), [textwrap.fill(m["label"], 16) for _, m in ms], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (slowest rank)")
        skipped = ", ".join(res["skipped"]) or "none"
        ax.set_title(f"({wl}) {res['description']}, {res['state_bytes'] / 2**30:.2f} GiB, steady median of rounds "
                     f"3-{res['rounds']}; labels: commit vs tierckpt (THREAD); skipped: {skipped}", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle(f"bench/peers.py, {rep['date']}, {rep['machine']['cpus']} CPUs", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
