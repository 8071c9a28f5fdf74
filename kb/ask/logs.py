"""A pasted log, read whole and from the end: the error blocks a failed run leaves, and the lines they came from.

A long log is mostly what every healthy run prints: config dumps, NCCL ``INFO`` lines, launcher banners, progress
bars, Trainer loss dicts, Python warnings. The failure is a few lines near the end (the last traceback, torchrun's
failure summary) and, on several ranks, the first rank that failed. ``read_log`` reads the lines one at a time (a
file or stdin of any length: its state is bounded) and keeps:

- error blocks: a Python traceback up to its exception line; a line that reports an error (``SomethingError:``,
  ``CUDA error``, ``out of memory``, NCCL ``WARN`` / ``ERROR``, a ``[ERROR]`` logging line, a fatal signal, a
  launcher's non-zero exit); torchrun's failure summary (``Root Cause (first observed failure)``, with the rank
  and the exit code);
- the user's own words around the log (the lines before its first log line and after its last).

torchrun's summary lists every failed rank under "Failures:" and the root cause ("first observed failure") after
it; the root cause's rank and exit code are read from that part only.

``LogTriage.used`` are the blocks an answer is built on (the root cause: the first failing rank's first error;
the last traceback; torchrun's summary), at most ``MAX_USED``; ``query_text`` is what retrieval reads: the user's
words and those blocks, never the healthy lines. What counts as an error is a line's form (a level, an exception
name, a library's error text), not a list of phrases from the questions kb was tested on.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_BLOCK_LINES = 40  # a traceback longer than this keeps its first line and its last lines
MAX_USED = 3
RETRIEVAL_LINES = 14  # a traceback's last lines retrieval reads (the frames nearest the exception, and its message)
MAX_EXCERPT_CHARS = 6000
MAX_PROSE_CHARS = 2000
KEEP_BLOCKS = 64  # the first and the last blocks kept while reading (a log can repeat one error per step)

# what a launcher or a logger puts before the text: "[rank3]: ", "[default3]:", "node-1: ", "[1,3]<stderr>:",
# a timestamp / level header ("[2026-01-01 10:00:00,123] [ERROR] [engine.py:12:f] ")
_PREFIX = re.compile(
    r"^(?:\[(?:rank|default)(?P<rank>\d+)\]:\s?|\[\d+,(?P<mpirank>\d+)\]<std(?:out|err)>:\s?|"
    r"(?P<host>[a-z0-9][\w.-]*\d):\s(?=\S))?"
)
_RANK_IN = re.compile(r"\[(?:rank|Rank|default)\s?(\d+)\]|\brank(?:\s*:\s*|\s+)(\d+)\b")
_LEVEL = re.compile(r"\b(INFO|DEBUG|WARN(?:ING)?|ERROR|CRITICAL|FATAL)\b")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
# an exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "deepspeed...DeepSpeedConfigError: ..."
_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::|$)")
# a line that reports an error in a library's own form (never a level-INFO line, never a Python warning)
_ERROR_LINE = re.compile(
    r"(?:[A-Z]\w*(?:Error|Exception)\b:)"  # an exception printed outside a traceback
    r"|\bCUDA error\b|\bcuda(?:Error|Runtime)\w*|\bCUBLAS_STATUS_\w+|\bCUDNN_STATUS_\w+|illegal memory access"
    r"|device-side assert|\bout of memory\b|\bOOM\b|\bnccl\w*Error\b|NCCL (?:WARN|ERROR)\b|\bNCCL error\b"
    r"|\[(?:ERROR|CRITICAL|FATAL)\]|^\s*(?:ERROR|CRITICAL|FATAL)\b[:\s]|\s-\s(?:ERROR|CRITICAL)\s-\s"
    r"|\bSegmentation fault\b|\bcore dumped\b|\bSIG(?:SEGV|KILL|ABRT|BUS)\b|^\s*Killed\s*$"
    r"|exits? with return code\s*=\s*-?[1-9]|\bexitcode\s*:\s*-?[1-9]|:\s*error:\s"
)
# a line a healthy run prints whatever it says (a level-INFO line, a Python or torch warning)
_HEALTHY_FORM = re.compile(
    r"\bNCCL INFO\b|\[INFO\]|\bINFO\b[:\]]|\s-\sINFO\s-\s|^\s*(?:[\w.]+\.)?\w*Warning:|\bwarnings\.warn\(|^\s*\[?W\d{4} "
)
_CHAINED = re.compile(r"During handling of the above exception|The above exception was the direct cause")
_GENERIC = re.compile(r"ChildFailedError|CalledProcessError|SystemExit|exits? with return code|\bexitcode\b")
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
_SUMMARY_START = re.compile(r"^\s*={10,}\s*$")
_SUMMARY_KEY = re.compile(r"Root Cause \(first observed failure\)|^\s*Failures:|\bFAILED\s*$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


@dataclass
class Block:
    """One error block: its kind, where it is in the log (1-based lines) and its text."""

    kind: str  # traceback | error | summary
    start: int
    end: int
    lines: list[str]
    rank: int | None = None
    repeats: int = 1  # the same block (ranks and numbers aside) seen this many times
    exitcode: int | None = None  # summary: the root cause's exit code

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def generic(self) -> bool:
        """What a launcher prints for any failure (torchrun's ChildFailedError and summary with a plain exit code, a
        CalledProcessError): shown with the answer, but it does not say what failed unless nothing else does."""
        if self.kind == "summary":
            return self.exitcode is None or self.exitcode >= 0
        return bool(_GENERIC.search(self.head))

    @property
    def head(self) -> str:
        """The line that names the error: a traceback's exception line, else the first line."""
        if self.kind == "traceback":
            for ln in reversed(self.lines):
                if _EXC_LINE.search(_strip(ln)[0]):
                    return ln.strip()
        return self.lines[0].strip() if self.lines else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start_line": self.start,
            "end_line": self.end,
            "rank": self.rank,
            "repeats": self.repeats,
            "text": self.text,
        }


@dataclass
class LogTriage:
    """What ``read_log`` found: counts, every kept block, the blocks used and the user's own words."""

    lines: int = 0
    chars: int = 0
    blocks: list[Block] = field(default_factory=list)  # kept blocks, in log order (first and last KEEP_BLOCKS)
    blocks_seen: int = 0
    prose: str = ""  # the user's words before and after the log
    failing_rank: int | None = None
    used: list[Block] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.used)

    def excerpt(self) -> str:
        """The used blocks' text, root cause first, at most MAX_EXCERPT_CHARS; a launcher's generic report only
        when no other block says what failed."""
        out, size = [], 0
        for b in [b for b in self.used if not b.generic] or self.used:
            # what names the error first (a traceback's exception line), then the lines nearest to it
            t = "\n".join(dict.fromkeys([b.head, *b.lines[-RETRIEVAL_LINES:]])) if b.kind == "traceback" else b.text
            if size + len(t) > MAX_EXCERPT_CHARS:
                t = t[: max(0, MAX_EXCERPT_CHARS - size)]
            if t:
                out.append(t)
                size += len(t)
        return "\n".join(out)

    def query_text(self) -> str:
        """What retrieval reads for this log: the user's words, then the used blocks."""
        return "\n".join(p for p in (self.prose.strip(), self.excerpt()) if p)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "chars": self.chars,
            "error_blocks": self.blocks_seen,
            "failing_rank": self.failing_rank,
            "used": [b.to_dict() for b in self.used],
        }


def _strip(line: str) -> tuple[str, int | None]:
    """The line without a launcher's rank / host prefix, and the rank that prefix names."""
    m = _PREFIX.match(line)
    rank = None
    if m and m.group(0):
        r = m.group("rank") or m.group("mpirank")
        rank = int(r) if r is not None else None
        line = line[m.end() :]
    if rank is None:
        mr = _RANK_IN.search(line)
        if mr:
            rank = int(mr.group(1) or mr.group(2))
    return line, rank


def is_error_line(line: str) -> bool:
    """Does this line report an error (in a library's or a logger's own form)? A level-INFO line or a Python /
    torch warning never does, whatever words it contains."""
    body, _ = _strip(line)
    if _HEALTHY_FORM.search(body):
        lvl = _LEVEL.findall(body)
        if not any(x in ("ERROR", "CRITICAL", "FATAL") for x in lvl) and "NCCL WARN" not in body:
            return False
    return bool(_ERROR_LINE.search(body))


def looks_like_log_line(line: str) -> bool:
    """A line a program printed rather than the user wrote (used to find where a pasted log starts and ends)."""
    body, rank = _strip(line)
    return bool(
        rank is not None
        or _LEVEL.search(body)
        or _TRACEBACK.search(body)
        or _EXC_LINE.search(body)
        or re.match(r"^\s+File \"|^\s*\[\d{4}-\d\d-\d\d|^\s*\d{4}-\d\d-\d\d[ T]\d\d:|^\s*\{'|^\s*\d+%\|", body)
        or _SUMMARY_START.match(body)
        or re.search(r"\w+\.py:\d+", body)
    )


def _key(b: Block) -> str:
    """What two reports of one block share: the text without ranks, hosts, numbers and addresses."""
    t = "\n".join(_strip(ln)[0] for ln in b.lines)
    t = re.sub(r"0x[0-9a-fA-F]+", "0x", t)
    return re.sub(r"\d+", "N", t)


class _Reader:
    def __init__(self) -> None:
        self.t = LogTriage()
        self.first: list[Block] = []
        self.last: deque[Block] = deque(maxlen=KEEP_BLOCKS)
        self.seen: dict[str, Block] = {}
        self.tb: Block | None = None
        self.tb_exc = False  # the open traceback has reached its exception line
        self.chained = False  # ... and a "During handling of the above exception" line followed it
        self.summary: Block | None = None
        self.summary_root = False  # inside the summary, past "Root Cause (first observed failure)"
        self.lead: list[str] = []  # the user's words before the log
        self.trail: list[str] = []  # lines after the last log line (the user's words, if the log ended)
        self.in_log = False

    def _add(self, b: Block) -> None:
        self.t.blocks_seen += 1
        k = _key(b)
        if k in self.seen:  # one error on every rank, or every step: counted on the first report
            self.seen[k].repeats += 1
            return
        if len(self.seen) < 4 * KEEP_BLOCKS:
            self.seen[k] = b
        if len(self.first) < KEEP_BLOCKS:
            self.first.append(b)
        else:
            self.last.append(b)

    def _close_tb(self) -> None:
        if self.tb is not None:
            while self.tb.lines and not self.tb.lines[-1].strip(" []:rank0123456789"):
                self.tb.lines.pop()  # trailing blank lines
            if len(self.tb.lines) > MAX_BLOCK_LINES:
                self.tb.lines = [self.tb.lines[0], "  ...", *self.tb.lines[-(MAX_BLOCK_LINES - 2) :]]
            self._add(self.tb)
        self.tb, self.tb_exc, self.chained = None, False, False

    def feed(self, n: int, raw: str) -> None:
        line = raw.rstrip("\r\n")
        self.t.lines = n
        self.t.chars += len(raw)
        body, rank = _strip(line)
        logish = looks_like_log_line(line)
        if not self.in_log:
            if logish:
                self.in_log = True
            elif len("\n".join(self.lead)) < MAX_PROSE_CHARS:
                self.lead.append(line)
                return
        if logish:
            self.trail = []
        elif line.strip():
            self.trail.append(line)
            del self.trail[:-20]
        # torchrun's failure summary: between two rules of '=', with "Root Cause"
        if self.summary is not None:
            self.summary.lines.append(line)
            self.summary.end = n
            if _ROOT_CAUSE.search(body):
                self.summary_root = True  # the rank and exit code that follow are the root cause's
            elif self.summary_root and (m := _SUMMARY_RANK.match(body)) and self.summary.rank is None:
                self.summary.rank = int(m.group(1))
            elif self.summary_root and (m := _SUMMARY_EXIT.match(body)) and self.summary.exitcode is None:
                self.summary.exitcode = int(m.group(1))
            if _SUMMARY_START.match(body) or len(self.summary.lines) > MAX_BLOCK_LINES:
                if any(_SUMMARY_KEY.search(_strip(x)[0]) for x in self.summary.lines):
                    self._add(self.summary)
                self.summary = None
            return
        if _SUMMARY_START.match(body):
            self._close_tb()
            self.summary = Block("summary", n, n, [line])
            self.summary_root = False
            return
        if _TRACEBACK.search(body):
            if self.tb is not None and self.chained:  # the next traceback of a chained exception
                self.tb.lines.append(line)
                self.tb.end = n
                self.tb_exc = self.chained = False
                return
            self._close_tb()
            self.tb = Block("traceback", n, n, [line], rank)
            return
        if self.tb is not None:
            # a frame, the exception line, or the message's continuation; anything else ends the traceback
            frame = body.startswith((" ", "\t")) or body.startswith("^") or not body.strip()
            if not self.tb_exc and (frame or _EXC_LINE.search(body)):
                self.tb.lines.append(line)
                self.tb.end = n
                self.tb_exc = bool(_EXC_LINE.search(body)) and not body.startswith((" ", "\t"))
                if self.tb.rank is None:
                    self.tb.rank = rank
                return
            if self.tb_exc and body.strip() and not logish and len(self.tb.lines) < MAX_BLOCK_LINES:
                self.tb.lines.append(line)  # a multi-line exception message
                self.tb.end = n
                return
            if self.tb_exc and (_CHAINED.search(body) or not body.strip()):
                self.tb.lines.append(line)  # "During handling of the above exception ...": the same failure
                self.tb.end = n
                self.tb_exc = not _CHAINED.search(body) and self.tb_exc
                if _CHAINED.search(body):
                    self.chained = True
                return
            self._close_tb()
        if is_error_line(line):
            self._add(Block("error", n, n, [line], rank))

    def finish(self) -> LogTriage:
        self._close_tb()
        if self.summary is not None and any(_SUMMARY_KEY.search(_strip(x)[0]) for x in self.summary.lines):
            self._add(self.summary)
        t = self.t
        t.blocks = [*self.first, *self.last]
        words = [*self.lead, *([""] if self.lead and self.trail else []), *self.trail]
        t.prose = "\n".join(words).strip()[:MAX_PROSE_CHARS]
        t.used = _choose(t.blocks)
        summary = next((b for b in reversed(t.blocks) if b.kind == "summary"), None)
        root = t.used[0] if t.used and t.used[0].kind != "summary" else None
        if summary is not None and summary.rank is not None:
            t.failing_rank = summary.rank
        elif root is not None:
            t.failing_rank = root.rank
        return t


# the failure at the end of a log: the error blocks that start within this many lines of its last one (a startup
# traceback a healthy run prints and survives is far earlier; the ranks of one crash report within seconds)
FAILURE_SPAN = 300


def _choose(blocks: list[Block]) -> list[Block]:
    """The blocks an answer is built on, root cause first: of the failure at the end of the log, the first traceback
    (else error) of the rank torchrun's summary names as the root cause, else the first one printed (the other
    ranks' reports of a crash, a peer's "connection closed" or an NCCL timeout, come after it); then the log's last
    traceback; then torchrun's last failure summary; at most MAX_USED, none twice."""
    errors = [b for b in blocks if b.kind != "summary"]
    summary = next((b for b in reversed(blocks) if b.kind == "summary"), None)
    root_rank = summary.rank if summary is not None else None
    picks: list[Block] = []
    if errors:
        last = max(b.end for b in errors)
        tail = [b for b in errors if b.start >= last - FAILURE_SPAN and not b.generic] or errors
        mine = [b for b in tail if root_rank is not None and b.rank == root_rank] or tail
        tbs = [b for b in mine if b.kind == "traceback"]
        picks.append(tbs[0] if tbs else mine[0])
    last_tb = next((b for b in reversed(errors) if b.kind == "traceback"), None)
    last_err = errors[-1] if errors else None
    for b in (last_tb, last_err if last_tb is None else None, summary):
        if b is not None and b not in picks:
            picks.append(b)
    return picks[:MAX_USED]


def read_log(lines: Iterable[str]) -> LogTriage:
    """Read a log line by line (any length; what is kept is bounded) and triage it."""
    r = _Reader()
    n = 0
    for n, ln in enumerate(lines, 1):
        r.feed(n, ln)
    r.t.lines = n
    return r.finish()


def iter_lines(text: str) -> Iterator[str]:
    """The lines of ``text``, each with its end, without copying the text."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1


def triage_text(text: str) -> LogTriage:
    return read_log(iter_lines(text))


# a pasted text is triaged as a log when it is a log and longer than a pasted error: more lines than this
TRIAGE_MIN_LINES = 25


def wants_triage(text: str, is_log: bool) -> bool:
    """Is this question a whole log (to read from its error blocks) rather than a pasted error?"""
    return is_log and text.count("\n") + 1 > TRIAGE_MIN_LINES


__all__ = ["Block", "LogTriage", "is_error_line", "read_log", "triage_text", "wants_triage"]
