"""Draw docs/mixing.svg: distance from random against passes, coin and planned.

Every computed point is marked (coin: filled circles, planned: open squares). A
log axis has no zero, so the planned passes that are exactly random sit on a row
of their own, "exactly 0", below it; the sizes that reach it at the same pass
(24 and 32 cards at 5) are set side by side so that none hides another.

    python benchmarks/plot_mixing.py [OUTPUT]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from shuffler.core.mixing import tv_coin, tv_planned

SIZES = {24: "#1b9e77", 32: "#d95f02", 52: "#7570b3", 104: "#e7298a"}
K_MAX, Y_MIN = 16, 1e-5
W, H, LEFT, RIGHT, TOP, BOTTOM = 750, 470, 70, 190, 30, 80
ZERO_GAP = 30  # pixels from the bottom of the log axis to the "exactly 0" row
PLOT_BOTTOM = H - BOTTOM


def x(k: float) -> float:
    return LEFT + (k - 1) / (K_MAX - 1) * (W - LEFT - RIGHT)


def y(tv: float) -> float:
    if tv == 0:
        return PLOT_BOTTOM + ZERO_GAP
    v = max(tv, Y_MIN)
    return TOP + (0 - math.log10(v)) / -math.log10(Y_MIN) * (PLOT_BOTTOM - TOP)


def polyline(points, colour, dashed=False) -> str:
    pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'


def circle(px: float, py: float, colour: str) -> str:
    return f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>'


def square(px: float, py: float, colour: str) -> str:
    return (f'<rect x="{px - 3.5:.1f}" y="{py - 3.5:.1f}" width="7" height="7" fill="white" '
            f'stroke="{colour}" stroke-width="1.5"/>')


def axes() -> list[str]:
    parts = []
    for e in range(0, 6):
        yy = y(10 ** -e)
        parts.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{W - RIGHT}" y2="{yy:.1f}" '
                     'stroke="#ddd"/>')
        label = f"1e-{e}" if e else "1"
        parts.append(f'<text x="{LEFT - 8}" y="{yy + 4:.1f}" text-anchor="end">{label}</text>')
    zero = y(0)
    parts.append(f'<line x1="{LEFT}" y1="{zero:.1f}" x2="{W - RIGHT}" y2="{zero:.1f}" '
                 'stroke="#999" stroke-dasharray="2 3"/>')
    parts.append(f'<text x="{LEFT - 8}" y="{zero + 4:.1f}" text-anchor="end">exactly 0</text>')
    for k in range(1, K_MAX + 1):
        parts.append(f'<text x="{x(k):.1f}" y="{zero + 24:.1f}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">'
                 'passes</text>')
    mid = (TOP + PLOT_BOTTOM) / 2
    parts.append(f'<text x="16" y="{mid}" text-anchor="middle" transform="rotate(-90 16 {mid})">'
                 'total variation distance from random</text>')
    return parts


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/mixing.svg")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>', *axes()]
    zeros: dict[int, list[int]] = {}  # pass -> the sizes exactly random there
    for n in SIZES:
        k0 = next(k for k in range(1, K_MAX + 1) if tv_planned(n, k) == 0)
        zeros.setdefault(k0, []).append(n)
    ly = TOP + 10
    for n, colour in SIZES.items():
        coin = [(x(k), y(float(tv_coin(n, k)))) for k in range(1, K_MAX + 1)]
        planned = []
        for k in range(1, K_MAX + 1):
            tv = tv_planned(n, k)
            px = x(k)
            if tv == 0:  # side by side with the other sizes exactly random at this pass
                share = zeros[k]
                px += 9 * (share.index(n) - (len(share) - 1) / 2)
            planned.append((px, y(float(tv))))
            if tv == 0:
                break
        parts.append(polyline(coin, colour))
        parts.append(polyline(planned, colour, dashed=True))
        parts.extend(circle(px, py, colour) for px, py in coin)
        parts.extend(square(px, py, colour) for px, py in planned)
        parts.append(f'<line x1="{W - RIGHT + 12}" y1="{ly}" x2="{W - RIGHT + 36}" y2="{ly}" '
                     f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{W - RIGHT + 42}" y="{ly + 4}">{n} cards: 0 at '
                     f'{len(planned)}</text>')
        ly += 20
    notes = ["solid, dots: coin flips", "dashed, squares: planned", "below 1e-5: drawn at 1e-5",
             "exactly 0: its own row"]
    for i, note in enumerate(notes):
        parts.append(f'<text x="{W - RIGHT + 12}" y="{ly + 10 + 18 * i}">{note}</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
