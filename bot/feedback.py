"""What the bots asked and what users said about the answers: the input of ``kb gaps``.

``FeedbackStore`` is the interface (a server database can replace SQLite later); ``SQLiteStore`` is the
default: WAL journal, one connection per thread, a busy timeout, the schema version in
``PRAGMA user_version`` and migrations applied in order on open. User ids are never stored: only a
salted hash (the salt is created once per database and kept in it).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

REASONS = ("didnt_fix", "wrong_version", "different_error", "unclear")

# each step takes the database from version i to i+1; never edit a released step, add one
MIGRATIONS: list[str] = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE asks (
        id TEXT PRIMARY KEY,
        ts REAL NOT NULL,
        platform TEXT NOT NULL,
        channel TEXT,
        user_hash TEXT,
        query TEXT NOT NULL,
        lang TEXT NOT NULL,
        answered INTEGER NOT NULL,
        top_score REAL,
        results TEXT NOT NULL
    );
    CREATE INDEX asks_ts ON asks (ts);
    CREATE TABLE votes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ask_id TEXT NOT NULL REFERENCES asks (id),
        ts REAL NOT NULL,
        user_hash TEXT,
        helpful INTEGER NOT NULL,
        reason TEXT
    );
    CREATE INDEX votes_ask ON votes (ask_id);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass
class AskRecord:
    id: str
    ts: float
    platform: str
    channel: str | None
    user_hash: str | None
    query: str
    lang: str
    answered: bool
    top_score: float | None
    results: list[dict[str, Any]]  # [{"id": entry id, "score": float}] as answered (or the closest, when declined)
    votes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shown_results(answer: dict[str, Any]) -> tuple[list[dict[str, Any]], float | None]:
    """What the user was shown ({id, score} of the results, or of the closest entries when declined) and the top score."""
    shown = answer.get("results") or answer.get("closest") or []
    results = [{"id": r["id"], "score": r["score"]} for r in shown]
    return results, (results[0]["score"] if results else None)


class FeedbackStore(Protocol):
    def record_ask(
        self, answer: dict[str, Any], platform: str, channel: str | None, user: str | None, ts: float | None = None
    ) -> str: ...

    def record_vote(self, ask_id: str, helpful: bool, reason: str | None, user: str | None) -> None: ...

    def asks(self, since: float | None = None) -> Iterator[AskRecord]: ...


class SQLiteStore:
    def __init__(self, path: str | Path):
        self.path = str(path)
        self._local = threading.local()
        self._init_lock = threading.Lock()
        with self._init_lock:
            con = self._con()
            self._migrate(con)
            row = con.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()
            if row is None:
                con.execute("INSERT OR IGNORE INTO meta VALUES ('salt', ?)", (secrets.token_hex(16),))
                con.commit()
                row = con.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()
            self._salt = row[0]

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, check_same_thread=True)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=30000")
            con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
        return con

    @staticmethod
    def _migrate(con: sqlite3.Connection) -> None:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"feedback database schema {version} is newer than this kb ({SCHEMA_VERSION}); upgrade kb"
            )
        for i in range(version, SCHEMA_VERSION):
            con.executescript("BEGIN;" + MIGRATIONS[i] + f"; PRAGMA user_version = {i + 1}; COMMIT;")

    def schema_version(self) -> int:
        return self._con().execute("PRAGMA user_version").fetchone()[0]

    def hash_user(self, user: str | None) -> str | None:
        if user is None:
            return None
        return hashlib.sha256(f"{self._salt}:{user}".encode()).hexdigest()[:16]

    def record_ask(
        self, answer: dict[str, Any], platform: str, channel: str | None, user: str | None, ts: float | None = None
    ) -> str:
        ask_id = uuid.uuid4().hex[:16]
        results, top = shown_results(answer)
        con = self._con()
        with con:
            con.execute(
                "INSERT INTO asks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ask_id,
                    time.time() if ts is None else ts,
                    platform,
                    channel,
                    self.hash_user(user),
                    answer.get("query", ""),
                    answer.get("lang", "en"),
                    int(bool(answer.get("answered"))),
                    top,
                    json.dumps(results),
                ),
            )
        return ask_id

    def record_vote(self, ask_id: str, helpful: bool, reason: str | None, user: str | None) -> None:
        if reason is not None and reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r} (known: {', '.join(REASONS)})")
        con = self._con()
        with con:
            if con.execute("SELECT 1 FROM asks WHERE id = ?", (ask_id,)).fetchone() is None:
                raise KeyError(f"no ask {ask_id!r}")
            uh = self.hash_user(user)
            # one vote per user and answer: "not helpful" then a reason is one vote with its reason
            row = (
                None
                if uh is None
                else con.execute(
                    "SELECT id, helpful, reason FROM votes WHERE ask_id = ? AND user_hash = ? ORDER BY id DESC",
                    (ask_id, uh),
                ).fetchone()
            )
            if row is None:
                con.execute(
                    "INSERT INTO votes (ask_id, ts, user_hash, helpful, reason) VALUES (?, ?, ?, ?, ?)",
                    (ask_id, time.time(), uh, int(helpful), reason),
                )
            else:
                keep = reason if reason is not None else (row[2] if bool(row[1]) == helpful else None)
                con.execute(
                    "UPDATE votes SET ts = ?, helpful = ?, reason = ? WHERE id = ?",
                    (time.time(), int(helpful), keep, row[0]),
                )

    def asks(self, since: float | None = None) -> Iterator[AskRecord]:
        con = self._con()
        votes: dict[str, list[dict[str, Any]]] = {}
        for ask_id, ts, helpful, reason in con.execute(
            "SELECT ask_id, ts, helpful, reason FROM votes WHERE ts >= ? ORDER BY id", (since or 0.0,)
        ):
            votes.setdefault(ask_id, []).append({"ts": ts, "helpful": bool(helpful), "reason": reason})
        rows = con.execute("SELECT * FROM asks WHERE ts >= ? ORDER BY ts, id", (since or 0.0,)).fetchall()
        for r in rows:
            yield AskRecord(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), r[8], json.loads(r[9]), votes.get(r[0], [])
            )

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


class MemoryStore:
    """An in-process store (dry runs, tests): same interface, nothing written to disk."""

    def __init__(self) -> None:
        self._asks: dict[str, AskRecord] = {}
        self._lock = threading.Lock()

    def record_ask(
        self, answer: dict[str, Any], platform: str, channel: str | None, user: str | None, ts: float | None = None
    ) -> str:
        ask_id = uuid.uuid4().hex[:16]
        results, top = shown_results(answer)
        rec = AskRecord(
            ask_id,
            time.time() if ts is None else ts,
            platform,
            channel,
            None if user is None else hashlib.sha256(user.encode()).hexdigest()[:16],
            answer.get("query", ""),
            answer.get("lang", "en"),
            bool(answer.get("answered")),
            top,
            results,
        )
        with self._lock:
            self._asks[ask_id] = rec
        return ask_id

    def record_vote(self, ask_id: str, helpful: bool, reason: str | None, user: str | None) -> None:
        if reason is not None and reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r} (known: {', '.join(REASONS)})")
        with self._lock:
            if ask_id not in self._asks:
                raise KeyError(f"no ask {ask_id!r}")
            votes = self._asks[ask_id].votes
            uh = None if user is None else hashlib.sha256(user.encode()).hexdigest()[:16]
            mine = next((v for v in votes if uh is not None and v.get("user_hash") == uh), None)
            if mine is None:
                votes.append({"ts": time.time(), "helpful": helpful, "reason": reason, "user_hash": uh})
            else:
                keep = reason if reason is not None else (mine["reason"] if mine["helpful"] == helpful else None)
                mine.update(ts=time.time(), helpful=helpful, reason=keep)

    def asks(self, since: float | None = None) -> Iterator[AskRecord]:
        with self._lock:
            recs = sorted(self._asks.values(), key=lambda r: (r.ts, r.id))
        return iter([r for r in recs if r.ts >= (since or 0.0)])
