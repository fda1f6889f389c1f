"""``shuffler --version`` tells an upgrade apart: two releases print different lines; run
from a git checkout it names the commit and whether tracked files changed (git asked
only under ``--version``), and without git it still prints the version and the commit
read from ``.git``; a build from a checkout records its commit in the wheel and the
sdist; CHANGELOG.md has a section per release, the newest the package's version."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import shuffler
from shuffler import version
from shuffler.schemas import validate

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"shuffler (?P<release>\S+)( \(git (?P<sha>[0-9a-f]{7})"
                  r"(?P<state>, dirty|, changes not checked)?\))?")
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs git to make a checkout")


def git(where: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c",
                           "commit.gpgsign=false", "-c",
                           "init.defaultBranch=main", *args], cwd=where, capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout.strip()


def release(where: Path, number: str) -> str:
    """``where`` made (or moved on to) a checkout of release ``number``: the package's
    own modules (the CLI is the installed one) and a pyproject, committed; its commit."""
    if not (where / ".git").exists():
        where.mkdir(parents=True)
        shutil.copytree(ROOT / "shuffler", where / "shuffler",
                        ignore=shutil.ignore_patterns("__pycache__", "_build.json"))
        shutil.copy(ROOT / "pyproject.toml", where)
        git(where, "init", "-q")
    init = where / "shuffler" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', f'__version__ = "{number}"',
                           init.read_text()))
    git(where, "add", "-A")
    git(where, "commit", "-qm", f"release {number}")
    return git(where, "rev-parse", "HEAD")


def run_version(checkout: Path, *args: str, path: str | None = None,
                name: str = "shuffler") -> subprocess.CompletedProcess[str]:
    """``--version`` of the package in ``checkout`` (first on the path), as a user runs it
    from elsewhere; ``path`` the PATH it sees (where git is, or is not)."""
    entry = "shuffler_cli.main" if name == "shuffler" else "shuffler_cli.safe"
    code = f"import sys; from {entry} import main; main(sys.argv[1:])"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "SHUFFLER_"))}
    env.update(PYTHONPATH=str(checkout), PATH=path or os.environ["PATH"])
    return subprocess.run([sys.executable, "-c", code, *args], cwd=checkout.parent, env=env,
                          capture_output=True, text=True, timeout=60)


@needs_git
def test_two_releases_print_different_versions_and_each_its_commit(tmp_path):
    checkout = tmp_path / "shuffler-src"
    first = release(checkout, "0.2.0")
    said = run_version(checkout, "--version")
    assert said.returncode == 0 and said.stderr == "", said.stderr
    assert said.stdout == f"shuffler 0.2.0 (git {first[:7]})\n"
    second = release(checkout, "0.3.0")
    upgraded = run_version(checkout, "--version")
    assert upgraded.stdout == f"shuffler 0.3.0 (git {second[:7]})\n" != said.stdout
    safe = run_version(checkout, "--version", name="shuffler-safe")
    assert safe.stdout == f"shuffler-safe 0.3.0 (git {second[:7]})\n"


@needs_git
def test_a_commit_that_is_not_a_release_is_told_apart_from_it(tmp_path):
    """The same release number, one commit on: the line differs by the commit."""
    checkout = tmp_path / "src"
    first = release(checkout, "0.2.0")
    (checkout / "shuffler" / "limits.py").write_text(
        (checkout / "shuffler" / "limits.py").read_text() + "\n# a fix after the release\n")
    git(checkout, "commit", "-qam", "a fix")
    after = run_version(checkout, "-V").stdout
    assert after.startswith("shuffler 0.2.0 (git ") and first[:7] not in after


@needs_git
def test_uncommitted_changes_say_dirty_and_untracked_files_do_not(tmp_path):
    checkout = tmp_path / "src"
    sha = release(checkout, "0.2.0")
    (checkout / "notes.txt").write_text("not tracked\n")
    assert run_version(checkout, "--version").stdout == f"shuffler 0.2.0 (git {sha[:7]})\n"
    limits = checkout / "shuffler" / "limits.py"
    limits.write_text(limits.read_text() + "\n# edited, not committed\n")
    assert run_version(checkout, "--version").stdout == \
        f"shuffler 0.2.0 (git {sha[:7]}, dirty)\n"
    as_json = run_version(checkout, "--json", "--version")
    said = validate(json.loads(as_json.stdout), "version")
    assert said == {"schema": 1, "version": "0.2.0",
                    "commit": {"sha": sha, "dirty": True, "from": "checkout"}}


@needs_git
def test_without_git_the_version_and_the_commit_are_read_from_the_checkout(tmp_path):
    """No git on the PATH (a Pi with the package copied over, a minimal image): the
    version, and the commit from .git's own files, loose ref or packed, whether a
    tracked file changed not known."""
    checkout = tmp_path / "src"
    sha = release(checkout, "0.2.0")
    no_git = tmp_path / "bin-without-git"
    no_git.mkdir()
    expected = f"shuffler 0.2.0 (git {sha[:7]}, changes not checked)\n"
    said = run_version(checkout, "--version", path=str(no_git))
    assert (said.returncode, said.stdout, said.stderr) == (0, expected, "")
    git(checkout, "pack-refs", "--all")  # the branch's ref now only in packed-refs
    assert not (checkout / ".git" / "refs" / "heads" / "main").exists()
    assert run_version(checkout, "--version", path=str(no_git)).stdout == expected
    as_json = json.loads(run_version(checkout, "--json", "--version",
                                     path=str(no_git)).stdout)
    assert validate(as_json, "version")["commit"] == {"sha": sha, "dirty": None,
                                                     "from": "checkout"}
    git(checkout, "checkout", "-q", "--detach")  # HEAD the commit itself
    assert run_version(checkout, "--version", path=str(no_git)).stdout == expected


@needs_git
def test_a_worktree_and_a_checkout_git_refuses_are_read_from_the_files(tmp_path):
    checkout = tmp_path / "src"
    release(checkout, "0.2.0")
    tree = tmp_path / "tree"
    git(checkout, "worktree", "add", "-q", "-b", "other", str(tree))
    sha = release(tree, "0.2.1")
    assert (tree / ".git").is_file()  # "gitdir: ...": the refs in the common folder
    assert version.commit(tree) == version.Commit(sha, False, "checkout")
    assert version._from_files(tree) == version.Commit(sha, None, "checkout")
    # a git that refuses (another user's checkout: "dubious ownership") or is missing
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho 'fatal: detected dubious ownership' >&2\n"
                              "exit 128\n")
    (fake / "git").chmod(0o755)
    said = run_version(tree, "--version", path=f"{fake}:{os.environ['PATH']}")
    assert said.stdout == f"shuffler 0.2.1 (git {sha[:7]}, changes not checked)\n"


@needs_git
def test_a_git_that_hangs_costs_at_most_its_limit(tmp_path, monkeypatch):
    """A git that never answers (a network file system, a huge checkout): --version
    waits GIT_SECONDS, then reads the commit from the files."""
    import time

    checkout = tmp_path / "src"
    sha = release(checkout, "0.2.0")
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nexec sleep 30\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    monkeypatch.setattr(version, "GIT_SECONDS", 0.5)
    start = time.monotonic()
    assert version.commit(checkout) == version.Commit(sha, None, "checkout")
    assert time.monotonic() - start < 5


@needs_git
def test_a_git_environment_pointing_elsewhere_is_not_followed(tmp_path):
    """Run from a git hook or a script with GIT_DIR set to another repository: the
    commit is still the package's own checkout's."""
    ours = tmp_path / "src"
    sha = release(ours, "0.2.0")
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "commit", "-q", "--allow-empty", "-m", "not ours")
    code = "import sys; from shuffler_cli.main import main; main(sys.argv[1:])"
    env = {**os.environ, "PYTHONPATH": str(ours), "GIT_DIR": str(other / ".git"),
           "GIT_WORK_TREE": str(other)}
    said = subprocess.run([sys.executable, "-c", code, "--version"], cwd=other, env=env,
                          capture_output=True, text=True, timeout=60)
    assert said.stdout == f"shuffler 0.2.0 (git {sha[:7]})\n", said.stderr


def test_an_empty_repository_or_a_broken_git_folder_is_the_release_alone(tmp_path):
    root = tmp_path / "src"
    (root / "shuffler").mkdir(parents=True)
    (root / "shuffler" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text("")
    (root / ".git").write_text("not a gitdir line\n")
    assert version.commit(root) is None
    (root / ".git").unlink()
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # no commit yet
    assert version.commit(root) is None
    assert version.describe(root) == shuffler.__version__


def test_a_folder_inside_someone_elses_repository_is_not_a_checkout(tmp_path):
    """site-packages inside a repository (a venv in a project) names no commit: only a
    folder holding .git, pyproject.toml and shuffler/ is our checkout."""
    (tmp_path / ".git").mkdir()
    site = tmp_path / "venv" / "site-packages"
    (site / "shuffler").mkdir(parents=True)
    (site / "shuffler" / "__init__.py").write_text("")
    assert not version.checkout_of(site) and not version.checkout_of(tmp_path)


@pytest.mark.parametrize("text", ["", "[]", "{", '{"commit": "abc", "dirty": false}',
                                  '{"commit": "' + "a" * 40 + '"}',
                                  '{"commit": "' + "A" * 40 + '", "dirty": true}',
                                  '{"commit": "' + "a" * 40 + '", "dirty": "no"}'])
def test_a_record_that_is_not_one_is_ignored(tmp_path, text):
    record = tmp_path / version.RECORD
    record.write_text(text)
    assert version.recorded(record) is None
    assert version.recorded(tmp_path / "absent.json") is None


def test_an_install_not_in_a_checkout_says_its_record_or_the_release(tmp_path, monkeypatch):
    """What a wheel's install prints: the build's record beside the module, or the
    release alone."""
    site = tmp_path / "site-packages"
    (site / "shuffler").mkdir(parents=True)
    record = site / "shuffler" / version.RECORD
    monkeypatch.setattr(version, "__file__", str(site / "shuffler" / "version.py"))
    assert version.describe(site) == shuffler.__version__
    assert version.as_json(site) == {"version": shuffler.__version__}
    record.write_text(json.dumps({"commit": "b" * 40, "dirty": False}))
    assert version.describe(site) == f"{shuffler.__version__} (git bbbbbbb)"
    assert version.as_json(site)["commit"] == {"sha": "b" * 40, "dirty": False,
                                               "from": "build"}


@pytest.mark.skipif(not (ROOT / ".git").exists() or GIT is None, reason="needs a checkout")
def test_this_checkout_names_its_commit():
    said = subprocess.run([sys.executable, "-m", "shuffler", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60).stdout
    match = LINE.fullmatch(said.strip())
    assert match and match["release"] == shuffler.__version__
    assert match["sha"] == git(ROOT, "rev-parse", "--short=7", "HEAD")


@needs_git
def test_what_a_build_records_for_a_tree(tmp_path, monkeypatch):
    """build_commit.record_of, which the build's commands write into the package: git's
    word for a checkout, the files' without git, an unpacked sdist's own record, or
    nothing for a copy."""
    import build_commit

    checkout = tmp_path / "src"
    sha = release(checkout, "0.2.0")
    assert json.loads(build_commit.record_of(checkout) or "") == {"commit": sha,
                                                                   "dirty": False}
    limits = checkout / "shuffler" / "limits.py"
    limits.write_text(limits.read_text() + "\n# not committed\n")
    assert json.loads(build_commit.record_of(checkout) or "")["dirty"] is True
    no_git = tmp_path / "bin-without-git"
    no_git.mkdir()
    monkeypatch.setenv("PATH", str(no_git))  # a chroot or an image build without git
    assert json.loads(build_commit.record_of(checkout) or "") == {"commit": sha,
                                                                   "dirty": None}
    unpacked = tmp_path / "shuffler-0.2.0"  # an sdist: no .git, the record it carries
    shutil.copytree(checkout, unpacked, ignore=shutil.ignore_patterns(".git"))
    assert build_commit.record_of(unpacked) is None
    (unpacked / "shuffler" / version.RECORD).write_text(build_commit.record_of(checkout) or "")
    assert json.loads(build_commit.record_of(unpacked) or "")["commit"] == sha
    (unpacked / "shuffler" / version.RECORD).write_text("{not json")
    assert build_commit.record_of(unpacked) is None


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists() or GIT is None, reason="needs a checkout")
def test_a_release_build_records_its_commit_in_the_sdist_and_the_wheel(tmp_path):
    """`python -m build` in a clean clone (the release procedure, CONTRIBUTING.md): the
    sdist carries the clone's commit, the wheel made from that sdist (away from any .git)
    carries it too, and the installed wheel prints it; a build from a copy without .git
    records nothing."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(ROOT), str(clone))
    head = git(clone, "rev-parse", "HEAD")
    proc = subprocess.run([sys.executable, "-m", "build", "-o", str(tmp_path / "dist"),
                           str(clone)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("shuffler-*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("shuffler-*.whl")
    with tarfile.open(sdist) as tf:
        top = sdist.name.removesuffix(".tar.gz")
        carried = tf.extractfile(f"{top}/shuffler/_build.json")
        assert carried is not None
        assert json.loads(carried.read()) == {"commit": head, "dirty": False}
        assert f"{top}/build_commit.py" in tf.getnames()
    with zipfile.ZipFile(wheel) as zf:
        assert json.loads(zf.read("shuffler/_build.json")) == {"commit": head, "dirty": False}
        assert "build_commit.py" not in zf.namelist()  # the build's, never installed
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=600)
    code = "import sys; from shuffler_cli.main import main; main(sys.argv[1:])"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "SHUFFLER_"))}
    said = subprocess.run([sys.executable, "-S", "-c",
                           f"import sys; sys.path[:0] = [{str(target)!r}] + "
                           f"{[p for p in sys.path if 'site-packages' in p]!r}; " + code,
                           "--version"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert said.stdout == f"shuffler {shuffler.__version__} (git {head[:7]})\n", said.stderr
    # the copy without .git a build may also be made from: no record, the release alone
    copy = tmp_path / "copy"
    shutil.copytree(clone, copy, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path / "bare"), str(copy)], check=True, capture_output=True,
                   timeout=600)
    (bare,) = (tmp_path / "bare").glob("shuffler-*.whl")
    with zipfile.ZipFile(bare) as zf:
        assert "shuffler/_build.json" not in zf.namelist()


# CHANGELOG.md: a section per release

CHANGELOG = ROOT / "CHANGELOG.md"
HEADING = re.compile(r"## (?P<version>\d+\.\d+\.\d+) - (?P<date>\d{4}-\d{2}-\d{2}|never tagged"
                     r" \(\d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2}\))")


def sections(text: str) -> list[str]:
    """The changelog's release headings in order, "Unreleased" as itself; a heading of
    another shape fails here."""
    found = []
    for line in text.splitlines():
        if line.startswith("## "):
            if line == "## Unreleased":
                found.append("Unreleased")
                continue
            match = HEADING.fullmatch(line)
            assert match, f"a release heading is '## X.Y.Z - YYYY-MM-DD': {line!r}"
            found.append(match["version"])
    return found


def as_tuple(number: str) -> tuple[int, ...]:
    return tuple(int(part) for part in number.split("."))


def check(text: str, package_version: str) -> list[str]:
    """The changelog's releases, newest first, after checking its shape: "Unreleased"
    first and once, then each release once, newest first, the newest the package's."""
    found = sections(text)
    assert found.count("Unreleased") == 1 and found[0] == "Unreleased", found
    releases = found[1:]
    assert releases == sorted(set(releases), key=as_tuple, reverse=True), releases
    assert releases and releases[0] == package_version, (releases, package_version)
    return releases


def test_the_changelog_has_a_section_per_release_the_newest_the_packages_version():
    assert check(CHANGELOG.read_text(), shuffler.__version__)[-1] == "0.1.0"


@pytest.mark.skipif(not (ROOT / ".git").exists() or GIT is None, reason="needs the history")
def test_every_version_the_package_declared_or_was_tagged_has_a_section():
    """Every ``__version__`` the history ever held (a bump never skips the changelog) and
    every release tag ``vX.Y.Z``."""
    history = git(ROOT, "log", "-p", "--format=", "--", "shuffler/__init__.py")
    declared = set(re.findall(r'^\+__version__ = "([^"]+)"', history, re.MULTILINE))
    assert "0.1.0" in declared  # the history is read
    tags = {t.removeprefix("v") for t in git(ROOT, "tag", "--list", "v*").split()}
    missing = (declared | tags | {shuffler.__version__}) - set(sections(CHANGELOG.read_text()))
    assert not missing, f"no CHANGELOG.md section for {sorted(missing)}"


@pytest.mark.parametrize("text", [
    "## 0.2.0 - 2026-12-05\n## Unreleased\n",  # Unreleased not on top
    "## 0.2.0 - 2026-12-05\n",  # no Unreleased
    "## Unreleased\n## 0.1.0 - 2026-11-30\n## 0.2.0 - 2026-12-05\n",  # oldest first
    "## Unreleased\n## 0.2.0 - 2026-12-05\n## 0.2.0 - 2026-12-06\n",  # twice
    "## Unreleased\n## 0.1.0 - 2026-11-30\n",  # the bump without its section
    "## Unreleased\n## v0.2.0\n",  # a heading of another shape
    "## Unreleased\n## 0.2.0 (2026-12-05)\n",
])
def test_a_changelog_out_of_shape_is_caught(text):
    with pytest.raises(AssertionError):
        check(text, "0.2.0")
    assert check("## Unreleased\n## 0.2.0 - 2026-12-05\n## 0.1.0 - 2026-11-30\n",
                 "0.2.0") == ["0.2.0", "0.1.0"]
