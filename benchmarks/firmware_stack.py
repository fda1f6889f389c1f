"""The firmware's worst-case stack, from the compiler's own figures: every function's
frame (avr-gcc -fstack-usage, with the Makefile's flags) summed along the deepest call
chain of the linked ELF (calls read from avr-objdump), plus two bytes of return address
per call, plus the deepest interrupt on top (interrupts do not nest here). Prints a
table, then the figures as JSON on the last line. Needs gcc-avr.

    python benchmarks/firmware_stack.py
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FIRMWARE = Path(__file__).resolve().parents[1] / "firmware"
FLAGS = ["-mmcu=atmega328p", "-DF_CPU=16000000UL", "-Os", "-std=gnu11", "-fshort-enums",
         "-ffunction-sections", "-fdata-sections"]
SOURCES = ["main.c", "hw.c", "uart.c", "link.c", "pass.c"]
RAM = 2048


def frames(build: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for src in SOURCES:
        obj = build / src.replace(".c", ".o")
        subprocess.run(["avr-gcc", *FLAGS, "-fstack-usage", "-c", str(FIRMWARE / src), "-o",
                        str(obj)], check=True, capture_output=True, cwd=build)
        for line in obj.with_suffix(".su").read_text().splitlines():
            where, size, _ = line.split("\t")
            out[where.rsplit(":", 1)[-1]] = int(size)
    return out


def calls(elf: Path) -> dict[str, set[str]]:
    dump = subprocess.run(["avr-objdump", "-d", str(elf)], check=True, capture_output=True,
                          text=True).stdout
    graph: dict[str, set[str]] = {}
    here = None
    for line in dump.splitlines():
        if m := re.match(r"^[0-9a-f]+ <([^>]+)>:", line):
            here = m[1]
            graph[here] = set()
        elif here and (m := re.search(r"\b(?:r?call)\s+.*<([^>+]+)>", line)):
            graph[here].add(m[1])
    return graph


def deepest(fn: str, graph, size, seen=()) -> tuple[int, list[str]]:
    best, chain = 0, []
    for callee in graph.get(fn, ()):
        if callee in seen:
            raise SystemExit(f"recursion through {callee}")
        depth, sub = deepest(callee, graph, size, (*seen, fn))
        if depth + 2 > best:
            best, chain = depth + 2, sub
    return size.get(fn, 0) + best, [fn, *chain]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp)
        size = frames(build)
        elf = build / "fw.elf"
        subprocess.run(["avr-gcc", "-mmcu=atmega328p", "-Wl,--gc-sections",
                        *sorted(str(p) for p in build.glob("*.o")), "-o", str(elf)],
                       check=True, capture_output=True)
        graph = calls(elf)
        static = subprocess.run(["avr-size", "-A", str(elf)], check=True, capture_output=True,
                                text=True).stdout
    sections = {m[1]: int(m[2]) for m in re.finditer(r"^\.(\w+)\s+(\d+)", static, re.M)}
    ram = sections.get("data", 0) + sections.get("bss", 0) + sections.get("noinit", 0)
    main_depth, main_chain = deepest("main", graph, size)
    isrs = [deepest(f, graph, size) for f in graph if f.startswith("__vector_")]
    isr_depth, isr_chain = max(isrs) if isrs else (0, [])
    worst = main_depth + 2 + isr_depth  # the interrupt's return address
    rows = [("main, deepest chain", main_depth, " > ".join(main_chain)),
            ("deepest interrupt", isr_depth, " > ".join(isr_chain)),
            ("worst case", worst, ""), ("static RAM", ram, ".data + .bss + .noinit"),
            ("RAM in use at worst", ram + worst, f"of {RAM}: {(ram + worst) / RAM:.1%}")]
    for name, n, what in rows:
        print(f"{name:<22} {n:>5} B  {what}")
    print(json.dumps({"stack_main": main_depth, "stack_isr": isr_depth, "stack_worst": worst,
                      "static_ram": ram, "ram_worst": ram + worst,
                      "ram_worst_share": round((ram + worst) / RAM, 3)}))


if __name__ == "__main__":
    sys.exit(main())
