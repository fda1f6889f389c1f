"""Docs that cannot drift (issue 35): what the pages cite is there, what they show a
command printing is what it prints, and every command's help has its examples."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: the top folders of the repository: a `name` in backticks starting so is a file's path
TOPS = ("shuffler/", "cli/", "firmware/", "firmware_bridge/", "hardware-sim/", "docs/",
        "tests/", "benchmarks/", ".ci/")
#: what a documented step makes (cited, never committed: not in a fresh clone), and the
#: step, as a page that cites the path writes it
MADE = {"firmware/build/": "make -C firmware",
        "tests/.axe": "npm install --prefix tests/.axe",
        "shuffler/_build.json": "python -m build"}


def cited_paths() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for m in re.finditer(r"`([^`\s]+)`", page.read_text(encoding="utf-8")):
            text = m.group(1).rstrip(".,:;")
            if not text.startswith(TOPS) or text.startswith(tuple(MADE)):
                continue
            if re.search(r"[*<>{}$]|\b[A-Z]{3,}\b", text):  # a pattern or a NAME to fill in
                continue
            found.append((page.relative_to(ROOT).as_posix(), text.split(":")[0]))
    return found


def test_every_path_a_page_cites_is_in_the_repository():
    """docs/architecture.md cited firmware/messages.h, a header that never existed (the
    C side is firmware/protocol_gen.h)."""
    cited = cited_paths()
    assert ("docs/architecture.md", "firmware/protocol_gen.h") in cited
    missing = [(page, path) for page, path in cited if not (ROOT / path).exists()]
    assert not missing


def test_a_path_a_step_makes_is_made_by_a_step_the_page_citing_it_names():
    """tests/.axe (axe-core, which only .ci/run's npm step installs) was cited as if it
    were committed: the quick tier failed on a fresh clone and in the sdist. A path left
    out of the check above is one a step makes: the page that cites it names the step,
    and git tracks nothing under it (checked in a checkout; the sdist has no .git)."""
    import subprocess

    for made, step in MADE.items():
        citing = [page for page in PAGES
                  if f"`{made}" in page.read_text(encoding="utf-8")]
        assert citing, f"{made} is cited nowhere: leave it out of MADE"
        for page in citing:
            assert step in " ".join(page.read_text(encoding="utf-8").split()), (page, step)
        if (ROOT / ".git").exists():
            tracked = subprocess.run(["git", "ls-files", "--", made], cwd=ROOT,
                                     capture_output=True, text=True, check=True).stdout
            assert tracked == "", f"{made} is made by `{step}`, yet committed: {tracked}"


def json_sections() -> dict[str, str]:
    """docs/json.md's sections by anchor, each its text up to the next anchor."""
    text = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    parts = re.split(r'^<a id="([^"]+)"></a>$', text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_json_page_has_a_row_for_every_key_of_every_output():
    """The pair tables were empty (the renderer dropped the properties beside a
    top-level oneOf); every table has rows and every top-level key its own."""
    from shuffler.schemas import load, names

    sections = json_sections()
    for name in (n for n in names() if n != "defs"):
        schema, section = load(name), sections[name.replace("_", "-")]
        for key in schema.get("properties", {}):
            assert f"| `{key}` |" in section, (name, key)
        heads = section.count("| key | type | required | meaning |")
        assert section.count("\n| `") >= heads, f"{name}: a table with no rows"


def test_every_command_output_says_where_its_schema_key_is():
    """The `schema` row of a command's output said nothing under "required": it is
    always on stdout, never in a socket reply's result."""
    from shuffler.schemas import load, names

    for name in names():
        schema = load(name)
        if "schema" in schema.get("properties", {}) and schema.get("title", "").startswith(
                "shuffler "):
            row = next(line for line in json_sections()[name.replace("_", "-")].splitlines()
                       if line.startswith("| `schema` |"))
            assert row.split("|")[3].strip(), (name, row)


def test_every_key_of_a_simulated_test_is_documented():
    """simulate's tests[] carried keys the page never named (cells, mean, runs_distance,
    min_hands, ...): the schema now closes the object, and each key has its row."""
    from shuffler.schemas import load

    items = load("simulate")["properties"]["tests"]["items"]
    assert items["additionalProperties"] is False
    section = json_sections()["simulate"]
    for key, sub in items["properties"].items():
        assert f"| `tests[].{key}` |" in section, key
        assert sub.get("description") or key in {"name", "statistic", "df", "p"}, key


#: what changes from run to run in a command's text: numbers, and the pile a prompt names
VARIES = re.compile(r"\d+(?:\.\d+)?|\b(?:LEFT|RIGHT)\b")


def masked(text: str) -> list[str]:
    return [VARIES.sub("#", line) for line in text.splitlines()]


def console_blocks(page: Path) -> list[list[tuple[str, list[str]]]]:
    """A page's ```console blocks: each a list of (command, the lines it printed)."""
    blocks = []
    for block in re.findall(r"^```console\n(.*?)^```", page.read_text(encoding="utf-8"),
                            flags=re.M | re.S):
        runs: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                runs.append((line[2:], []))
            else:
                runs[-1][1].append(line)
        blocks.append(runs)
    return blocks


def test_the_readme_console_block_is_what_the_commands_print(tmp_path):
    """The README's console block had drifted from what the commands print (the distance
    to two digits, no prompts, no retries). Its commands run here, in order, on a state
    folder of their own (no first-run note), both streams as a terminal shows them."""
    import shlex

    from tests.cli import invoke

    (blocks,) = console_blocks(ROOT / "README.md")
    assert len(blocks) == 2
    (tmp_path / "state").mkdir()
    for command, shown in blocks:
        args = shlex.split(command)
        assert args[0] == "shuffler"
        said = invoke(tmp_path, *args[1:])
        assert masked(said.output) == masked("\n".join(shown)), (command, said.output)


def guide_quote(start: str) -> str:
    """The guide's quote (in *italics*, over line breaks) that begins ``start``."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "guide.md").read_text(encoding="utf-8"))
    m = re.search(r"(?<!\*)\*(" + re.escape(start) + r"[^*]*)\*(?!\*)", text)  # not **bold**
    assert m, start
    return m.group(1)


def test_the_guides_quoted_messages_are_what_the_machine_says(run):
    """The guide quotes the messages a dealer meets: each is what the code says."""
    from shuffler.faces.panel import battery_headline

    jam = run("--sim-fault", "jam:13", "pass")
    assert jam.stderr.splitlines()[-1].startswith(
        "shuffler: " + guide_quote("Jam at card 13"))
    assert run("--sim-fault", "jam:13:stuck", "clear").stdout.startswith(
        guide_quote("not cleared"))
    low = guide_quote("Battery low")
    left, needed = (int(n) for n in re.findall(r"\d+", low)[:2])
    assert battery_headline({"state": "low", "passes_left": left}, needed) == low
    assert battery_headline({"state": "critical", "passes_left": 0}, 5) == guide_quote(
        "Battery critical")


ACTIVATE = ". .venv/bin/activate"


def test_the_venv_is_activated_before_the_first_bare_shuffler(tmp_path):
    """Every example is bare `shuffler` while the install puts it in .venv/bin: the
    README says to activate the venv before its first such example, the guide names the
    step, and the line as written puts the venv's shuffler on the PATH."""
    import os
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bare = re.search(r"^(?:\$ )?shuffler\b", readme, flags=re.M)
    assert bare and ACTIVATE in readme[:bare.start()]
    assert ACTIVATE in (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    venv = Path(sys.executable).parent.parent  # the venv running the tests, as .venv
    (tmp_path / ".venv").symlink_to(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/bin:/bin"
    found = subprocess.run(["sh", "-c", f"{ACTIVATE} && command -v shuffler"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=30, check=False)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == (venv / "bin" / "shuffler").resolve()


def commands():
    """Every command under ``shuffler`` with its context, the group first."""
    import click

    from shuffler_cli.main import cli

    def walk(cmd, path, parent=None):
        ctx = click.Context(cmd, info_name=path[-1], parent=parent)
        yield " ".join(path), cmd, ctx
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name], ctx)

    return list(walk(cli, ["shuffler"]))


def examples(help_text: str) -> list[str]:
    """The command lines an Examples paragraph gives (before the two spaces of a note)."""
    lines = help_text.split("Example", 1)[1].splitlines()[1:] if "Example" in help_text else []
    found = []
    for line in lines:
        if not line.strip():
            break
        if line.strip().startswith("shuffler "):
            found.append(re.split(r"\s{2,}", line.strip())[0])
    return found


def parse(line: str) -> str:
    """Parse ``line`` as click would run it, every level, without running anything: the
    command it names (``shuffler score add``)."""
    import shlex

    from shuffler_cli.main import cli

    args = shlex.split(line.split(" > ")[0])[1:]  # a shell's redirection is not the CLI's
    ctx = cli.make_context("shuffler", args)
    cmd = cli
    while (rest := [*ctx._protected_args, *ctx.args]) and hasattr(cmd, "resolve_command"):
        name, cmd, rest = cmd.resolve_command(ctx, rest)
        ctx = cmd.make_context(name, rest, parent=ctx)
    return ctx.command_path


def test_every_command_has_help_examples_and_they_parse():
    """mixing, simulate and score's own commands had no examples; every one has, and each
    example is a command line the CLI takes (options and arguments that exist)."""
    for path, cmd, ctx in commands():
        found = examples(cmd.get_help(ctx))
        assert found, f"{path}: no examples in its help"
        for line in found:
            named = parse(line)
            assert named == path or named.startswith(path + " ") or path == "shuffler", line


def test_mode_lists_its_choices_in_one_order():
    """--mode said [planned|coin] on hand and pass, [coin|planned] on simulate."""
    orders = {re.search(r"--mode \[([a-z|]+)\]", cmd.get_help(ctx)).group(1)
              for _, cmd, ctx in commands() if "--mode [" in cmd.get_help(ctx)}
    assert orders == {"planned|coin"}
