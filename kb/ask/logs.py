"""A pasted log, read whole and from the end: the error blocks a failed run leaves, and the lines they came from.

A long log is mostly what every healthy run prints: config dumps, NCCL ``INFO`` lines, launcher banners, progress
bars, Trainer loss dicts, Python warnings. The failure is a few lines near the end (the last traceback, torchrun's
failure summary) and, on several ranks, the first rank that failed. ``read_log`` reads the lines one at a time (a
file or stdin of any length: its state is bounded) and keeps:

- error blocks: a Python traceback up to its exception line; a line that reports an error (``SomethingError:``,
  ``CUDA error``, ``out of memory``, NCCL ``WARN`` / ``ERROR``, a ``[ERROR]`` logging line, a fatal signal, a
  launcher's non-zero exit); torchrun's failure summary (``Root Cause (first observed failure)``, with the rank
  and the exit code);
- in a pasted text (``triage_text``), the user's own words around the log: the lines before its first log line
  and after its last, less what has a program's form (a notice with indented items, a line whose shape, numbers
  aside, the log printed before). A file or stdin (``read_log``) is all log: its first lines are
  what the program printed first (accelerate's "values were not passed" notice), never the user's question.

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

from kb.lang import CJK

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
    r"\bNCCL INFO\b|\[INFO\]|\bINFO\b[:\]]|\s-\sINFO\s-\s|^\s*(?:[\w.]+\.)?\w*Warning:|\bwarnings\.warn\(|^\s*\[?[IW]\d{4} "
)
# the forms of a line a program printed, beyond a level or a traceback: a glog header ("I1202 13:31:25.77 ...",
# "[W1202 ...]"), a tag a logger puts first ("[transformers] ", "[c10d] ", "[rank 0] "), a tqdm bar anywhere in
# the line ("epoch 0:  62%|######   | 10/16"), a dict or a dataclass repr (Trainer's loss dicts, TrainOutput(...)),
# a rule of '=' / '-' / '*'
_PRINTED = re.compile(
    r"^\s*\[?[IWEF]\d{4} \d\d:\d\d:\d\d|^\s*\[[A-Za-z][\w. -]{0,30}\]\s|\d+%\|[^|]*\|\s*\d+/\d+"
    r"|^\s*\{['\"]|^\s*[A-Z]\w*\(\w+=|^\s*[=*-]{10,}\s*$"
)
_GLOG_ERROR = re.compile(r"^\s*\[?[EF]\d{4} \d\d:\d\d:\d\d")
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
    return bool(_ERROR_LINE.search(body) or _GLOG_ERROR.match(body))


def looks_like_log_line(line: str) -> bool:
    """A line a program printed rather than the user wrote (used to find where a pasted log starts and ends)."""
    body, rank = _strip(line)
    return bool(
        rank is not None
        or _LEVEL.search(body)
        or _TRACEBACK.search(body)
        or _EXC_LINE.search(body)
        or re.match(r"^\s+File \"|^\s*\[\d{4}-\d\d-\d\d|^\s*\d{4}-\d\d-\d\d[ T]\d\d:|^\s*\d+%\|", body)
        or _SUMMARY_START.match(body)
        or _PRINTED.search(body)
        or re.search(r"\w+\.py:\d+", body)
    )


def _shape(line: str) -> str:
    """A line as a program prints it every time: numbers, addresses and spacing aside."""
    return re.sub(r"\d+(?:\.\d+)?", "N", re.sub(r"0x[0-9a-fA-F]+", "0x", line)).strip()


MAX_SHAPES = 4096  # the shapes of the log's plain lines remembered (to tell the user's words after it from output)


def _key(b: Block) -> str:
    """What two reports of one block share: the text without ranks, hosts, numbers and addresses."""
    return _shape("\n".join(_strip(ln)[0] for ln in b.lines))


class _Reader:
    def __init__(self, prose: bool) -> None:
        self.prose = prose  # look for the user's words around the log (a pasted text), or not (a file, stdin)
        self.shapes: set[str] = set()  # the shapes of plain lines inside the log
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

    def _remember_shape(self, line: str) -> None:
        if line and len(self.shapes) < MAX_SHAPES:
            self.shapes.add(_shape(line))

    def _follow_trail(self, line: str, logish: bool) -> None:
        """The plain lines after the last log line so far (the user's words, if the log has ended); plain lines
        the log goes on after are output, and their shapes are remembered (the user's words will not have them)."""
        if logish:
            for x in self.trail:
                self._remember_shape(x)
            self.trail = []
            return
        self.trail.append(line if line.strip() else "")  # a blank line: where the user's words may start
        if len(self.trail) > 20:
            self._remember_shape(self.trail.pop(0))

    def feed(self, n: int, raw: str) -> None:
        line = raw.rstrip("\r\n")
        self.t.lines = n
        self.t.chars += len(raw)
        body, rank = _strip(line)
        logish = looks_like_log_line(line)
        if not self.in_log:
            if logish or not self.prose:
                self.in_log = True
            elif len("\n".join(self.lead)) < MAX_PROSE_CHARS:
                self.lead.append(line)
                return
        if self.prose:
            self._follow_trail(line, logish)
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
        lead, trail = _words(self.lead, self.shapes, True), _words(self.trail, self.shapes, False)
        t.prose = "\n".join([*lead, *([""] if lead and trail else []), *trail]).strip()[:MAX_PROSE_CHARS]
        t.used = _choose(t.blocks)
        summary = next((b for b in reversed(t.blocks) if b.kind == "summary"), None)
        root = t.used[0] if t.used and t.used[0].kind != "summary" else None
        if summary is not None and summary.rank is not None:
            t.failing_rank = summary.rank
        elif root is not None:
            t.failing_rank = root.rank
        return t


_ASKED = re.compile(rf"[?？]\s*$|[{CJK}]")


def _words(lines: list[str], shapes: set[str], before: bool) -> list[str]:
    """The user's words among the plain lines before (``before``) or after a pasted log. An indented line is a
    program's (a notice's items, a warning's source line, a config dump), and so is the line it continues: before
    the log, the log starts at the first such block; after it, the log ends with the last one. After the log, the
    lines up to the first blank one are output too, except a question (``_ASKED``). Of the rest, a line whose shape
    the log printed already, or which these lines repeat, is output ("step 12 loss 2.31")."""
    indented = [k for k, ln in enumerate(lines) if ln[:1] in (" ", "\t") and ln.strip()]
    if indented and before:
        lines = lines[: max(indented[0] - 1, 0)]
    elif indented:
        lines = lines[indented[-1] + 1 :]
    if not before and lines and lines[0].strip():
        # the lines straight after the log's last line, before a blank one, are still its output ("training
        # finished"), unless one is a question: it ends with a question mark, or it is in Chinese
        glued = next((k for k, ln in enumerate(lines) if not ln.strip()), len(lines))
        lines = [ln for ln in lines[:glued] if _ASKED.search(ln)] + lines[glued:]
    seen: dict[str, int] = {}
    for ln in lines:
        seen[_shape(ln)] = seen.get(_shape(ln), 0) + 1
    out = [ln for ln in lines if not ln.strip() or (_shape(ln) not in shapes and seen[_shape(ln)] == 1)]
    return "\n".join(out).strip("\n").splitlines()


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


def read_log(lines: Iterable[str], prose: bool = False) -> LogTriage:
    """Read a log line by line (any length; what is kept is bounded) and triage it. ``prose``: the lines may hold
    the user's words before and after the log (a pasted question); a file or stdin is read as all log."""
    r = _Reader(prose)
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
    """A pasted question that is (or holds) a whole log: the user's words are kept apart."""
    return read_log(iter_lines(text), prose=True)


# a pasted text is triaged as a log when it is a log and longer than a pasted error: more lines than this
TRIAGE_MIN_LINES = 25
REPEATED = 3  # lines that differ only in their numbers, printed this many times, are a program's ("step 3 loss 2.1")


def wants_triage(text: str, is_log: bool) -> bool:
    """Is this question a whole log (to read from its error blocks) rather than a pasted error? It is longer than
    a pasted error, and it has an error's form (``is_log``) or at least half its lines are a program's output (a
    healthy run's log pasted whole has no traceback to show it is one): a log line's form, or a line the paste
    repeats with other numbers."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) <= TRIAGE_MIN_LINES:
        return False
    if is_log:
        return True
    shapes: dict[str, int] = {}
    for ln in lines:
        shapes[_shape(ln)] = shapes.get(_shape(ln), 0) + 1
    # a line a program printed: in a log's form, or one of REPEATED lines that differ only in their numbers
    printed = sum(looks_like_log_line(ln) or shapes[_shape(ln)] >= REPEATED for ln in lines)
    return 2 * printed >= len(lines)


__all__ = ["Block", "LogTriage", "is_error_line", "read_log", "triage_text", "wants_triage"]
