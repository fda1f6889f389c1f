"""Draw docs/mixing.svg: distance from random against passes, coin and planned.

    python benchmarks/plot_mixing.py [OUTPUT]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from shuffler.mixing import tv_coin, tv_planned

SIZES = {24: "#1b9e77", 32: "#d95f02", 52: "#7570b3", 104: "#e7298a"}
K_MAX, Y_MIN = 16, 1e-5
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 440, 70, 150, 30, 50


def x(k: float) -> float:
    return LEFT + (k - 1) / (K_MAX - 1) * (W - LEFT - RIGHT)


def y(tv: float) -> float:
    v = max(tv, Y_MIN)
    return TOP + (0 - math.log10(v)) / -math.log10(Y_MIN) * (H - TOP - BOTTOM)


def polyline(points, colour, dashed=False) -> str:
    pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/mixing.svg")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>']
    for e in range(0, 6):
        yy = y(10 ** -e)
        parts.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{W - RIGHT}" y2="{yy:.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{yy + 4:.1f}" text-anchor="end">1e-{e}</text>'
                     if e else f'<text x="{LEFT - 8}" y="{yy + 4:.1f}" text-anchor="end">1</text>')
    for k in range(1, K_MAX + 1):
        parts.append(f'<text x="{x(k):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">'
                 'passes</text>')
    parts.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">'
                 'total variation distance from random</text>')
    ly = TOP + 10
    for n, colour in SIZES.items():
        coin = [(x(k), y(float(tv_coin(n, k)))) for k in range(1, K_MAX + 1)]
        planned = []
        for k in range(1, K_MAX + 1):
            tv = float(tv_planned(n, k))
            planned.append((x(k), y(tv)))
            if tv == 0:
                break
        parts.append(polyline(coin, colour))
        parts.append(polyline(planned, colour, dashed=True))
        zx, zy = planned[-1]
        parts.append(f'<circle cx="{zx:.1f}" cy="{zy:.1f}" r="4" fill="{colour}"/>')
        parts.append(f'<line x1="{W - RIGHT + 12}" y1="{ly}" x2="{W - RIGHT + 36}" y2="{ly}" '
                     f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{W - RIGHT + 42}" y="{ly + 4}">{n} cards</text>')
        ly += 20
    parts.append(f'<text x="{W - RIGHT + 12}" y="{ly + 10}">solid: coin flips</text>')
    parts.append(f'<text x="{W - RIGHT + 12}" y="{ly + 28}">dashed: planned</text>')
    parts.append(f'<text x="{W - RIGHT + 12}" y="{ly + 46}">dot: exactly 0</text>')
    parts.append(f'<text x="{W - RIGHT + 12}" y="{ly + 60}">(drawn at 1e-5)</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
