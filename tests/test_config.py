import os
import subprocess
import sys
from pathlib import Path

import pytest

from shuffler.config import Config, load_config, load_config_text
from shuffler.core.mechanics import Feed
from shuffler.core.planning import Mode
from shuffler.errors import ConfigError

from .cli import SHUFFLER

GOOD = """
device = "sim"
[mechanism]
feed = "bottom"
jam_limit_s = 0.4
retries = 3
[hand]
passes = 5
cards = 32
mode = "planned"
[table]
seats = ["Ann", "Bob", "Cy", "Di"]
first_dealer = "Cy"
[battery]
chemistry = "lithium"
"""


def test_a_full_config_reads_back():
    cfg = load_config_text(GOOD, "good.toml")
    assert cfg.mechanism.feed is Feed.BOTTOM
    assert cfg.mechanism.limits.jam_seconds == 0.4 and cfg.mechanism.limits.retries == 3
    assert (cfg.hand.passes, cfg.hand.cards, cfg.hand.mode) == (5, 32, Mode.PLANNED)
    assert cfg.table.seats == ("Ann", "Bob", "Cy", "Di") and cfg.table.first_dealer == "Cy"
    assert cfg.battery.chemistry == "lithium"


def test_an_empty_file_gives_the_defaults():
    cfg = load_config_text("", "empty.toml")
    assert cfg.device == "sim" and cfg.hand == Config().hand


@pytest.mark.parametrize(("text", "message"), [
    ("[hand]\npasses = 0",
     "bad.toml: [hand] passes: expected a whole number from 1 to 30, got 0"),
    ("[hand]\ncards = 105", "[hand] cards: expected a whole number from 1 to 104, got 105"),
    ("[hand]\npasses = '4'", "[hand] passes: expected a whole number from 1 to 30, got '4'"),
    ("[hand]\npasses = true", "[hand] passes: expected a whole number"),
    ("[mechanism]\nfeed = 'side'", "[mechanism] feed: expected 'top' or 'bottom', got 'side'"),
    ("[mechanism]\njam_limit_s = -1", "[mechanism] jam_limit_s: expected a number from 0.05"),
    ("device = 'usb'", "device: expected sim, sim-avr, sim-gpio"),
    ("[table]\nseats = ['A', 'A']", "[table] seats: expected a list of 2 to 8 distinct"),
    ("[table]\nfirst_dealer = 'Zed'", "[table] first_dealer: expected one of the seats"),
    ("[battery]\nchemistry = 'lead'", "[battery] chemistry: expected 'alkaline' or 'lithium'"),
    ("[battery]\nlow_volts = 6.5\ncritical_volts = 7", "critical_volts: expected at most"),
    ("[battery]\nlow_volts = 9.5", "[battery] low_volts: expected below a fresh alkaline "
     "block's 9.5 V at rest (at or above it the battery never reads low), got 9.5"),
    ("[battery]\nchemistry = 'nimh'\nlow_volts = 9.9", "low_volts: expected below a fresh nimh"),
    ("[hand]\npases = 4", "bad.toml: [hand] pases: unknown key"),
    ("colour = 'red'", "bad.toml: colour: unknown key"),
    ("hand = 3", "bad.toml: [hand]: expected a table, got 3"),
    ("[hand\npasses = 4", "bad.toml: not valid TOML"),
])
def test_every_error_names_the_file_the_key_and_what_was_expected(text, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "bad.toml")
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


def test_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
    assert load_config(tmp_path / "nope.toml", explicit=False) == Config()


def test_an_unreadable_file_is_a_config_error(tmp_path):
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(p)


def test_the_deployment_example_config_loads():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "deploy" / "config.toml"
    cfg = load_config(path)
    assert cfg.device == "gpio" and cfg.hand.passes == 5 and cfg.service.group == "shuffler"


# -- hostile inputs: each one exit 2 naming the input, never a hang or a traceback -------



def run_with_config(path: Path | str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([SHUFFLER, "--no-service", "--config", str(path), "status"],
                          capture_output=True, text=True, timeout=30, env=env)


def test_a_fifo_as_config_is_refused_without_waiting(tmp_path):
    """Before: the command hung for ever waiting for a writer."""
    os.mkfifo(tmp_path / "config.toml")
    result = run_with_config(tmp_path / "config.toml", tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{tmp_path / 'config.toml'}: the config file is a FIFO" in result.stderr


@pytest.mark.parametrize(("path", "says"), [
    ("/dev/zero", "/dev/zero: the config file is a character device"),  # before: MemoryError
    ("/dev/null", "/dev/null: the config file is a character device"),
    ("big", "big.toml: the config file is larger than"),
    ("deep", "tables or arrays nested more than 32 deep"),  # before: RecursionError, exit 1
    ("nul", "state_dir: expected a folder path (1 to 4095 bytes, no NUL)"),  # before: exit 1
    ("socket", "[service] socket: expected a socket path (1 to 107 bytes"),
])
def test_a_hostile_config_is_exit_2_naming_it(tmp_path, path, says):
    files = {
        "big": ("big.toml", "# padding\n" * 30_000),
        "deep": ("deep.toml", "a = " + "[" * 600 + "]" * 600),
        "nul": ("nul.toml", 'state_dir = "/tmp/a\\u0000b"'),
        "socket": ("socket.toml", f'[service]\nsocket = "/tmp/{"s" * 5000}.sock"'),
    }
    if path in files:
        name, text = files[path]
        (tmp_path / name).write_text(text)
        path = str(tmp_path / name)
    result = run_with_config(path, tmp_path)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+nan"])
@pytest.mark.parametrize("key", ["[mechanism]\njam_limit_s", "[battery]\nlow_volts",
                                 "[gpio]\nservo_angle", "[hand]\ntouch_timeout_s"])
def test_nan_and_infinities_are_refused(key, value):
    with pytest.raises(ConfigError, match=f"expected a number from .* got {value.lstrip('+')}"):
        load_config_text(f"{key} = {value}", "f.toml")


@pytest.mark.parametrize("text", [
    "[table]\nseats = " + "[" * 30 + "]" * 30,
    "[hand]\npasses = '" + "x" * 100_000 + "'",
    "[" + ".".join(["t"] * 40) + "]",
    "a" + ".a" * 2000 + " = 1",
    "[hand]\n'\\u0000' = 1",
])
def test_a_bad_value_gets_a_short_message(text):
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "f.toml")
    assert len(str(err.value)) < 300 and str(err.value).startswith("f.toml: ")


def test_the_shared_kinds_check_paths_texts_and_flags():
    """The kinds a key is declared with ([web], [mqtt], ...) refuse the same way."""
    from shuffler.config_table import FLAG, Reader, path, text

    r = Reader("f.toml", "demo", {"p": "a\0b", "t": "bad\nname", "f": 1, "ok": "/x"})
    for kind, key in ((path(), "p"), (text("a name"), "t"), (FLAG, "f")):
        with pytest.raises(ConfigError, match=rf"\[demo\] {key}: expected"):
            r.get(key, None, kind)
    assert r.get("ok", None, path()) == Path("/x")


@pytest.mark.parametrize("hosts, ok", [
    ('["shuffler.club.lan", "Table-7"]', ("shuffler.club.lan", "table-7")),
    ('"shuffler.club.lan"', None),  # a list, not one name
    ('["evil.example/x"]', None),
    ('[""]', None),
    ("[1]", None),
])
def test_web_hosts_is_a_list_of_host_names(hosts, ok):
    text = f"[web]\nhosts = {hosts}\n"
    if ok is None:
        with pytest.raises(ConfigError, match=r"\[web\] hosts: expected a list of host names"):
            load_config_text(text, "f.toml")
    else:
        assert load_config_text(text, "f.toml").web.hosts == ok


# -- one table: the reader, the defaults and docs/config.md come from the keys -----------

ROOT = Path(__file__).resolve().parents[1]


def render_config():
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_config",
                                                  ROOT / "docs" / "render_config.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_is_rendered_from_the_keys():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "render_config.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_key_missing_from_the_page_or_a_page_edited_by_hand_fails_the_check(
        tmp_path, monkeypatch):
    import dataclasses

    from shuffler.config_table import rows, whole

    page = render_config()
    text = page.render()
    # a new key in the table: the page rendered now names it, so the stored one is stale
    extra = dataclasses.replace(rows(Config)[-1], name="sparkle_level", kind=whole(1, 3))
    monkeypatch.setattr(page, "rows", lambda cls: [*rows(cls), extra])
    assert "sparkle_level" in page.render() and page.render() != text
    monkeypatch.undo()
    # a page edited by hand
    edited = tmp_path / "config.md"
    edited.write_text(text.replace("cards in the load", "cards in the tray"), encoding="utf-8")
    monkeypatch.setattr(page, "PAGE", edited)
    monkeypatch.setattr(sys, "argv", ["render_config.py", "--check"])
    assert page.main() == 1
    edited.write_text(text, encoding="utf-8")
    assert page.main() == 0


def test_every_field_of_the_config_is_a_key_or_derived():
    """A field added with a plain default would be silently unread: only these are derived."""
    import dataclasses

    from shuffler.config_table import rows

    def plain(cls: type) -> set[str]:
        found = set()
        for f in dataclasses.fields(cls):
            if not f.metadata:
                found.add(f"{cls.__name__}.{f.name}")
            elif "shuffler.section" in f.metadata:
                found |= plain(f.default_factory)
        return found

    assert plain(Config) == {"Config.source", "GpioConfig.motor_max_duty"}
    names = [r.where for r in rows(Config)]
    assert len(names) == len(set(names))
    for row in rows(Config):  # the page shows an example of a key with no default
        assert row.doc and (row.default is not None or row.decl.example is not None), row.where


@pytest.mark.parametrize("example", ["docs/deploy/config.toml", "tests/vm/config.toml"])
def test_every_key_of_the_shipped_configs_is_in_the_table(example):
    import tomllib

    from shuffler.config_table import rows

    known = {(r.table, r.name) for r in rows(Config)}
    doc = tomllib.loads((ROOT / example).read_text())
    used = {("", k) for k, v in doc.items() if not isinstance(v, dict)}
    used |= {(t, k) for t, v in doc.items() if isinstance(v, dict) for k in v}
    assert used and used <= known, used - known
    load_config(ROOT / example)


@pytest.mark.parametrize(("page", "blocks"), [("config.md", 2), ("guide.md", 1),
                                              ("mqtt.md", 1)])
def test_every_config_example_in_the_docs_loads(page, blocks):
    """What the pages show a user to write is a config the reader takes."""
    import re

    found = re.findall(r"```toml\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)
    assert len(found) == blocks
    for block in found:
        load_config_text(block, f"docs/{page}")


def test_the_highest_low_volts_allowed_still_says_low_on_a_fresh_block():
    """low_volts just below a fresh block's volts fires on that block's first sag: the
    limit refused above is the one where it would never fire."""
    from shuffler.config import FRESH_VOLTS
    from shuffler.core.battery import CURVES, judge

    for chemistry, fresh in FRESH_VOLTS.items():
        cfg = load_config_text(f"[battery]\nchemistry = '{chemistry}'\n"
                               f"low_volts = {fresh - 0.05:.2f}", "ok.toml")
        curve = CURVES[chemistry]
        sagged = curve.charge_at(fresh - 0.1, under_load=False)
        assert judge(sagged, 100, curve, low_volts=cfg.battery.low_volts) == "low"


def test_the_engine_timings_are_their_own_table():
    config = load_config_text("[engine]\nsoft_start_s = 0.3\nbeam_min_gap_s = 0.02\n")
    assert (config.engine.soft_start_s, config.engine.beam_min_gap_s) == (0.3, 0.02)
    timings = config.engine.timings()
    assert (timings.soft_start_s, timings.min_gap_s, timings.glitch_s) == (0.3, 0.02, 0.001)
    with pytest.raises(ConfigError, match=r"\[engine\] beam_glitch_s: expected a number"):
        load_config_text("[engine]\nbeam_glitch_s = 1\n")


def test_an_engine_key_left_under_gpio_is_taken_with_a_warning(tmp_path):
    """A config from 0.2.0 keeps working: the old place is read, checked, and named."""
    old = load_config_text("[gpio]\nsoft_start_s = 0.3\nbeam_glitch_s = 0.002\n")
    assert (old.engine.soft_start_s, old.engine.beam_glitch_s) == (0.3, 0.002)
    both = load_config_text("[gpio]\nsoft_start_s = 0.3\n[engine]\nsoft_start_s = 0.2\n")
    assert both.engine.soft_start_s == 0.2  # the new place wins
    with pytest.raises(ConfigError, match=r"\[gpio\] soft_start_s: expected a number"):
        load_config_text("[gpio]\nsoft_start_s = 9\n")  # checked where it stands
    with pytest.raises(ConfigError, match=r"\[gpio\] beam_min_gap: unknown key"):
        load_config_text("[gpio]\nbeam_min_gap = 0.01\n")
    config = tmp_path / "old.toml"
    config.write_text("[gpio]\nsoft_start_s = 0.3\n")
    proc = subprocess.run([SHUFFLER, "--config", str(config), "--no-service", "--json",
                           "status"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("{")  # the JSON is untouched: the warning is on stderr
    assert proc.stderr.count("config key moved") == 1, proc.stderr
    assert "[gpio] soft_start_s" in proc.stderr and "[engine] soft_start_s" in proc.stderr
