import pytest

from shuffler.config import Config, load_config, load_config_text
from shuffler.errors import ConfigError
from shuffler.mechanics import Feed
from shuffler.planning import Mode

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
    ("device = 'usb'", "device: expected sim or sim-gpio"),
    ("[table]\nseats = ['A', 'A']", "[table] seats: expected a list of 2 to 8 distinct"),
    ("[table]\nfirst_dealer = 'Zed'", "[table] first_dealer: expected one of the seats"),
    ("[battery]\nchemistry = 'lead'", "[battery] chemistry: expected 'alkaline' or 'lithium'"),
    ("[battery]\nlow_volts = 6.5\ncritical_volts = 7", "critical_volts: expected at most"),
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
