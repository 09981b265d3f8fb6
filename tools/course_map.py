"""Draw docs/img/course_map.png, the README's picture of the course: the assignments in five
parts, read left to right. Run: .venv/bin/python tools/course_map.py"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARTS = [
    ("One step, one device", ["01 optimizers", "02 LR schedules", "03 memory"]),
    ("Many devices, on paper", ["04 parallelism", "05 communication", "06 compute & scaling"]),
    ("Numbers, data, failures", ["07 numerics & attention", "08 data & checkpoints", "09 debugging & cost"]),
    ("The lab, on real ranks", ["10 data parallelism", "11 model parallelism", "12 experts, FP8, Triton"]),
    ("All of it at once", ["13 capstone: your own\nDP x TP x PP trains a GPT"]),
]
COLORS = ["#dbe9f6", "#e3f1df", "#fbe8d3", "#efe0f3", "#f6f0c9"]


def draw(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(13.5, 3.4), dpi=110)
    ax.set_xlim(0, len(PARTS))
    ax.set_ylim(0, 3.6)
    ax.axis("off")
    for i, ((title, items), color) in enumerate(zip(PARTS, COLORS)):
        ax.text(i + 0.5, 3.35, title, ha="center", va="center", fontsize=11, weight="bold")
        for j, item in enumerate(items):
            y = 2.55 - j * 0.95 if len(items) > 1 else 1.6
            ax.add_patch(FancyBboxPatch((i + 0.07, y - 0.33), 0.86, 0.66, boxstyle="round,pad=0.02",
                                        facecolor=color, edgecolor="#555555"))
            ax.text(i + 0.5, y, item, ha="center", va="center", fontsize=10)
        if i < len(PARTS) - 1:
            ax.annotate("", xy=(i + 1.04, 1.6), xytext=(i + 0.96, 1.6),
                        arrowprops=dict(arrowstyle="->", color="#555555"))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    draw(ROOT / "docs" / "img" / "course_map.png")
