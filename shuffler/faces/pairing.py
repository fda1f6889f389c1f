"""Pairing phones with the table, as a consumer device does it.

``shuffler pair`` prints a six-digit code, good for :data:`CODE_MINUTES` minutes and for
one phone: the page sends it once (``POST /api/pair``) and gets a token of its own,
which every later action carries (``X-Pairing-Token``). ``shuffler pair --list`` shows
the phones, ``--revoke ID`` forgets one, ``--new`` replaces the code. Both live in the
state folder (``pairing-code``, ``phones.json``, mode 0600; a token is kept only as its
SHA-256), and the running service reads them again whenever they change, so a new code
or a revocation holds at once. Nothing here logs the code or a token.

A code's life is measured on the boot clock (``CLOCK_BOOTTIME``: it only moves forward,
the same in every process, and counts a suspend), never on the wall clock: a Pi has no
real-time clock, and before NTP sets it the wall clock may be days off and then jump. A
code made in another boot is dead. The wall clock only says, for a person, until when
(``expires``); a token does not expire, and its ``paired_at`` is only for reading.

A phone may also pair with a touch on the machine, as a Hue bridge's link button does
(:class:`TouchPairing`): the page asks (``POST /api/pair {"touch": true}``), says "touch
the sensor to pair", and a touch on the sensor within :data:`TOUCH_WINDOW_S` seconds
pairs it. Only the table can make that touch, so nothing sent from the network can
pair without it; a touch while two addresses ask at once pairs neither (it cannot
tell which is the dealer's) and tells both why.

Guessing codes is throttled per address (:class:`Throttle`): a client's first few wrong
codes are judged, then it waits, twice as long each time (429 with ``Retry-After``).
Past :data:`GLOBAL_PER_MINUTE` wrong codes a minute from everyone together, only an
address with no wrong code yet is judged: guessers from many addresses are held back,
and the dealer's phone, which has sent none, is never shut out by them. The page's
server answers ``POST /api/pair`` through :class:`PagePairing`.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import hmac
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from shuffler.logs import Burst, get_logger
from shuffler.service.protocol import error_reply
from shuffler.service.request import RequestError

log = get_logger("shuffler.web")  # the page's: pairing is asked for through it

CODE_MINUTES = 10
FREE_TRIES = 3  # wrong codes a client may send before it has to wait
FIRST_WAIT_S = 5.0  # then 5 s, 10 s, 20 s ... up to MAX_WAIT_S
MAX_WAIT_S = 900.0
GLOBAL_PER_MINUTE = 10
MAX_CLIENTS_TRACKED = 1024
TOUCH_WINDOW_S = 30.0  # a touch on the machine pairs a phone that asked this recently
MAX_ASKING = 64  # phones asking to pair by touch at once (the oldest goes)
MAX_PHONES = 32

CODE_FILE = "pairing-code"
PHONES_FILE = "phones.json"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def boot_clock() -> float:
    """Seconds since this boot, suspend included: the clock a code's life is measured on."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def boot_id() -> str:
    """This boot's id (a boot clock reading means nothing in another boot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Code:
    code: str
    made: float  # on the boot clock
    boot: str
    lifetime: float = CODE_MINUTES * 60

    def left(self, clock: float, boot: str) -> float:
        """Seconds the code has left on the boot clock at ``clock`` (0: dead)."""
        if boot != self.boot or not 0 <= clock - self.made < self.lifetime:
            return 0.0
        return self.made + self.lifetime - clock


@dataclass(frozen=True)
class Phone:
    id: str
    paired_at: float
    address: str
    agent: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "paired_at": _iso(self.paired_at), "address": self.address,
                "agent": self.agent}


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Pairing:
    """The code and the paired phones in ``folder``, shared by the CLI and the service
    (every change under an exclusive lock, every write atomic)."""

    def __init__(self, folder: Path, now: Callable[[], float] = time.time,
                 clock: Callable[[], float] = boot_clock,
                 boot: Callable[[], str] = boot_id) -> None:
        self.folder = Path(folder)
        self.now = now  # the wall clock: only for what a person reads
        self.clock, self.boot = clock, boot
        self._cache: dict[str, tuple[tuple[int, int, int], Any]] = {}

    # -- the files ------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "pairing.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._owned_by_folder(self.folder / "pairing.lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self, name: str) -> Any:
        """The file's JSON, read again only when the file changed (None: none, or bad)."""
        path = self.folder / name
        try:
            st = path.stat()
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._cache.get(name)
        if cached and cached[0] == key:
            return cached[1]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        self._cache[name] = (key, data)
        return data

    def _write(self, name: str, data: Any) -> None:
        from shuffler.files import atomic_write

        path = self.folder / name
        atomic_write(path, (json.dumps(data, indent=1) + "\n").encode())
        path.chmod(0o600)
        self._owned_by_folder(path)

    def _owned_by_folder(self, path: Path) -> None:
        """Run as root (``sudo shuffler pair``), give the file to the state folder's owner,
        the service's user, so the running service can still read and change it."""
        if os.geteuid() == 0:
            st = self.folder.stat()
            os.chown(path, st.st_uid, st.st_gid)

    # -- the code ---------------------------------------------------------------------
    def code(self) -> Code | None:
        """The code in force, or None (none made, used, expired, made in another boot or
        unreadable)."""
        data = self._read(CODE_FILE)
        if not (isinstance(data, dict) and isinstance(data.get("code"), str)
                and isinstance(data.get("made"), int | float)
                and isinstance(data.get("boot"), str)):
            return None
        code = Code(data["code"], float(data["made"]), data["boot"])
        return code if self.left(code) > 0 else None

    def left(self, code: Code) -> float:
        """Seconds ``code`` has left, on the boot clock."""
        return code.left(self.clock(), self.boot())

    def expires(self, code: Code) -> float:
        """When ``code`` dies by the wall clock (epoch seconds): for a person to read."""
        return self.now() + self.left(code)

    def current_or_new(self) -> Code:
        """The live code, or a fresh one: what ``shuffler pair`` prints."""
        with self._locked():
            return self.code() or self._new_code()

    def new_code(self) -> Code:
        with self._locked():
            return self._new_code()

    def _new_code(self) -> Code:
        code = Code(f"{secrets.randbelow(10**6):06d}", self.clock(), self.boot())
        self._write(CODE_FILE, {"code": code.code, "made": code.made, "boot": code.boot,
                                "made_at": _iso(self.now())})
        return code

    def redeem(self, given: str, address: str, agent: str) -> tuple[Phone, str] | None:
        """The new phone and its token when ``given`` is the live code (which is then
        spent), or None."""
        with self._locked():
            code = self.code()
            if code is None or not hmac.compare_digest(given.encode(), code.code.encode()):
                return None
            (self.folder / CODE_FILE).unlink(missing_ok=True)
            return self._add(address, agent)

    def add(self, address: str, agent: str) -> tuple[Phone, str]:
        """Pair a new phone (the table confirmed it: a touch): the phone and its token."""
        with self._locked():
            return self._add(address, agent)

    def _add(self, address: str, agent: str) -> tuple[Phone, str]:
        token = secrets.token_urlsafe(24)
        phone = Phone(secrets.token_hex(3), self.now(), address[:64], agent[:80])
        phones = [p for p in self._phones_raw() if isinstance(p, dict)]
        phones.append({**phone.to_dict(), "paired_at": phone.paired_at,
                       "token_sha256": _hash(token)})
        self._write(PHONES_FILE, phones[-MAX_PHONES:])
        return phone, token

    # -- the phones ---------------------------------------------------------------------
    def _phones_raw(self) -> list[Any]:
        data = self._read(PHONES_FILE)
        return data if isinstance(data, list) else []

    def phones(self) -> list[Phone]:
        out = []
        for p in self._phones_raw():
            try:
                out.append(Phone(str(p["id"]), float(p["paired_at"]), str(p["address"]),
                                 str(p["agent"])))
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def known(self, token: str) -> bool:
        """Whether ``token`` belongs to a paired phone (read afresh when the file changed)."""
        if not token:
            return False
        digest = _hash(token)
        return any(isinstance(p, dict) and hmac.compare_digest(str(p.get("token_sha256")),
                                                               digest)
                   for p in self._phones_raw())

    def revoke(self, which: str) -> list[str]:
        """Forget the phone ``which`` (an id, or ``all``); the ids forgotten."""
        with self._locked():
            phones = self._phones_raw()
            gone = [str(p.get("id")) for p in phones
                    if isinstance(p, dict) and which in ("all", p.get("id"))]
            if gone:
                self._write(PHONES_FILE, [p for p in phones if str(p.get("id")) not in gone])
            return gone


@dataclass
class _Client:
    failures: int = 0
    until: float = 0.0  # may not be judged before


@dataclass
class Throttle:
    """Who may have a pairing code judged now. Pure: time is passed in."""

    free: int = FREE_TRIES
    first_wait: float = FIRST_WAIT_S
    max_wait: float = MAX_WAIT_S
    per_minute: int = GLOBAL_PER_MINUTE
    clients: collections.OrderedDict[str, _Client] = field(
        default_factory=collections.OrderedDict)
    recent: collections.deque[float] = field(default_factory=collections.deque)

    def wait(self, client: str, now: float) -> float:
        """Seconds ``client`` must wait before a code it sends is judged (0: judge it)."""
        while self.recent and self.recent[0] <= now - 60:
            self.recent.popleft()
        c = self.clients.get(client)
        if c is None:  # no wrong code yet: judged, whatever others have sent
            return 0.0
        mine = max(0.0, c.until - now)
        full = (self.recent[0] + 60 - now) if len(self.recent) >= self.per_minute else 0.0
        return max(mine, full)

    def failed(self, client: str, now: float) -> float:
        """Count a wrong code; returns how long the client must now wait."""
        self.recent.append(now)
        c = self.clients.pop(client, None) or _Client()
        self.clients[client] = c  # most recent last
        while len(self.clients) > MAX_CLIENTS_TRACKED:
            self.clients.popitem(last=False)
        c.failures += 1
        if c.failures >= self.free:
            c.until = now + min(self.max_wait, self.first_wait * 2 ** (c.failures - self.free))
        return max(0.0, c.until - now)

    def succeeded(self, client: str) -> None:
        self.clients.pop(client, None)


@dataclass
class _Asking:
    client: str
    agent: str
    since: float
    #: "asking", "confirmed" (the touch came), "both" (it came while another asked too)
    state: str = "asking"


@dataclass
class TouchPairing:
    """Phones asking to pair with a touch on the machine, by their request's secret id.
    Pure: time is passed in; the token is made by :meth:`Pairing.add` once confirmed."""

    window: float = TOUCH_WINDOW_S
    asking: collections.OrderedDict[str, _Asking] = field(
        default_factory=collections.OrderedDict)

    def _expire(self, now: float) -> None:
        for rid, a in list(self.asking.items()):
            if now - a.since >= self.window * 2:  # an answer is kept a window for its poll
                del self.asking[rid]

    def ask(self, client: str, agent: str, now: float) -> str:
        """A phone at ``client`` asks: its request's id (a secret only it knows). One
        request an address: a new one replaces its earlier one."""
        self._expire(now)
        for rid, a in list(self.asking.items()):
            if a.client == client and a.state == "asking":
                del self.asking[rid]
        rid = secrets.token_urlsafe(16)
        self.asking[rid] = _Asking(client, agent[:80], now)
        while len(self.asking) > MAX_ASKING:
            self.asking.popitem(last=False)
        return rid

    def live(self, now: float) -> list[_Asking]:
        return [a for a in self.asking.values()
                if a.state == "asking" and now - a.since < self.window]

    def touched(self, now: float) -> bool:
        """The dealer touched the sensor: True if the touch is for pairing (someone asks
        within the window), which then pairs the one address asking, or none if two or
        more ask at once."""
        live = self.live(now)
        if not live:
            return False
        state = "confirmed" if len({a.client for a in live}) == 1 else "both"
        for a in live:
            a.state = state
        return True

    def answer(self, rid: str, now: float) -> tuple[str, float, _Asking | None]:
        """(state, seconds left to touch, the request) for request ``rid``: ``asking``,
        ``confirmed`` (now spent: pair it), ``both``, or ``expired`` (or unknown)."""
        self._expire(now)
        a = self.asking.get(rid) if rid else None
        if a is None:
            return "expired", 0.0, None
        if a.state == "asking":
            left = self.window - (now - a.since)
            return ("asking", left, a) if left > 0 else ("expired", 0.0, a)
        del self.asking[rid]
        return a.state, 0.0, a


#: a pairing answer as the page sends it: (HTTP status, the JSON reply)
Reply = tuple[int, dict[str, Any]]


class PagePairing:
    """``POST /api/pair`` as the page's server answers it from its threads: a code judged
    (:class:`Throttle`, per address), or a touch asked for and then polled
    (:class:`TouchPairing`); ``now`` is the server's clock."""

    def __init__(self, folder: Path) -> None:
        self.files = Pairing(folder)
        self.throttle = Throttle()
        self.asking = TouchPairing()
        self.lock = threading.Lock()
        self._throttled = Burst(log, "pairing attempts throttled")

    def touched(self, now: float) -> bool:
        """The dealer touched the sensor between hands (the service's touch claim): True
        if it was for pairing (a phone asks), and then no pass starts."""
        with self.lock:
            taken = self.asking.touched(now)
        if taken:
            log.info("touch for pairing")
        return taken

    def ask(self, client: str, agent: str, dealing: bool, now: float) -> Reply:
        """A phone asks to pair with a touch (refused while a hand is being dealt)."""
        if dealing:
            return HTTPStatus.CONFLICT, error_reply(RequestError(
                "a hand is being dealt (a touch now starts its next pass): pair after its "
                "last pass", "pairing_busy"))
        with self.lock:
            rid = self.asking.ask(client, agent, now)
        log.info("a phone asks to pair by touch", client=client)
        return _asking(rid, TOUCH_WINDOW_S, f"within {TOUCH_WINDOW_S:.0f} s")

    def answer(self, client: str, rid: str, now: float) -> Reply:
        """Where a touch pairing stands for request ``rid``."""
        with self.lock:
            state, left, asked = self.asking.answer(rid, now)
        if state == "asking":
            return _asking(rid, round(left, 1), f"{left:.0f} s left")
        if state == "both":
            return HTTPStatus.CONFLICT, error_reply(RequestError(
                "two devices asked to pair at the same moment, so the touch paired neither: "
                "ask again and touch, or enter a code from `shuffler pair`",
                "pairing_ambiguous"))
        if state != "confirmed" or asked is None or asked.client != client:
            return HTTPStatus.GONE, error_reply(RequestError(
                f"no touch within {TOUCH_WINDOW_S:.0f} s: ask again, then touch the sensor",
                "pairing_expired"))
        try:
            phone, token = self.files.add(client, asked.agent)
        except OSError as e:
            return self._unusable(e)
        with self.lock:
            self.throttle.succeeded(client)
        return _paired(phone, token, client, "touch")

    def pair(self, client: str, given: str, agent: str,
             now: float) -> tuple[int, dict[str, Any], float]:
        """Judge a pairing code from ``client``: (status, reply, seconds to wait)."""
        with self.lock:
            wait = self.throttle.wait(client, now)
            if wait > 0:
                self._throttled.note(client=client, retry_after_s=math.ceil(wait))
                return (HTTPStatus.TOO_MANY_REQUESTS, error_reply(RequestError(
                    f"too many wrong codes: wait {math.ceil(wait)} s", "throttled")), wait)
            try:
                found = self.files.redeem(given, client, agent)
            except OSError as e:
                return (*self._unusable(e), 0.0)
            if found is None:
                log.debug("pairing code wrong", client=client)
                return (HTTPStatus.FORBIDDEN, error_reply(RequestError(
                    "wrong or expired code: run `shuffler pair` for the code, or pair with "
                    "a touch on the machine", "forbidden")), self.throttle.failed(client, now))
            self.throttle.succeeded(client)
        return (*_paired(*found, client, "code"), 0.0)

    def _unusable(self, e: OSError) -> Reply:
        log.warning("pairing files unusable", folder=str(self.files.folder), error=str(e))
        return HTTPStatus.SERVICE_UNAVAILABLE, error_reply(RequestError(
            f"the machine cannot use its pairing files: {e.strerror}", "file_access"))


def _asking(rid: str, left: float, when: str) -> Reply:
    return HTTPStatus.ACCEPTED, {"ok": True, "result": {
        "request": rid, "state": "asking", "left_s": left,
        "message": f"touch the sensor on the machine to pair ({when})"}}


def _paired(phone: Phone, token: str, client: str, by: str) -> Reply:
    log.info("phone paired", phone=phone.id, client=client, by=by)
    return HTTPStatus.OK, {"ok": True, "result": {"phone": phone.id, "token": token}}
