"""Bot settings: one small TOML file (every key optional, defaults below), tokens only from the environment.

```toml
[bot]
mode = "mention"            # "mention": answer only when addressed (a mention, a slash command); "all": every message
allow_channels = []         # channel ids the bot answers in; empty: every channel it is in
thread_replies = false      # Discord: open a thread for the answer instead of replying in place
site_base_url = ""          # links to entry pages of the static site (kb export), e.g. "https://kb.example.org"
log_content = false         # write query text into the logs (off: only lengths, ids and hashes)
feedback_db = "kb-feedback.sqlite"

[limits]
user_per_minute = 6         # token bucket per user: rate ...
user_burst = 3              # ... and burst
channel_per_minute = 30
channel_burst = 10
attachment_bytes = 262144   # 256 KiB
workers = 4                 # threads answering queries (the core never runs on the event loop)
cache_seconds = 600         # answers to the same normalised query are reused this long
cache_size = 512
results = 3                 # results per answer ("more results" shows up to 3 x this)
```

Tokens: ``DISCORD_TOKEN``; ``SLACK_BOT_TOKEN`` and ``SLACK_APP_TOKEN`` (Socket Mode). A ``[tokens]`` table
is accepted only in a file named on the command line (``kb bot ... --settings FILE``); tokens are never
logged or printed (``Settings.redacted()`` is what ``--check`` shows).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

TOKEN_ENV = {"discord": ("DISCORD_TOKEN",), "slack": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")}
MAX_SETTINGS_BYTES = 64_000


class SettingsError(ValueError):
    """A bad settings file: the message names the file and the key."""


@dataclass
class Settings:
    mode: str = "mention"
    allow_channels: list[str] = field(default_factory=list)
    thread_replies: bool = False
    site_base_url: str = ""
    log_content: bool = False
    feedback_db: str = "kb-feedback.sqlite"
    user_per_minute: float = 6.0
    user_burst: int = 3
    channel_per_minute: float = 30.0
    channel_burst: int = 10
    attachment_bytes: int = 262_144
    workers: int = 4
    cache_seconds: float = 600.0
    cache_size: int = 512
    results: int = 3
    tokens: dict[str, str] = field(default_factory=dict, repr=False)

    def token(self, name: str) -> str | None:
        return os.environ.get(name) or self.tokens.get(name) or None

    def missing_tokens(self, platform: str) -> list[str]:
        return [n for n in TOKEN_ENV[platform] if not self.token(n)]

    def redacted(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens"] = {n: "set" if self.token(n) else "missing" for names in TOKEN_ENV.values() for n in names}
        return d

    def allowed(self, channel_id: str | None) -> bool:
        return not self.allow_channels or (channel_id is not None and str(channel_id) in self.allow_channels)


_SECTIONS = {
    "bot": ("mode", "allow_channels", "thread_replies", "site_base_url", "log_content", "feedback_db"),
    "limits": (
        "user_per_minute",
        "user_burst",
        "channel_per_minute",
        "channel_burst",
        "attachment_bytes",
        "workers",
        "cache_seconds",
        "cache_size",
        "results",
    ),
}
_BOUNDS = {
    "user_per_minute": (0.1, 600),
    "user_burst": (1, 100),
    "channel_per_minute": (0.1, 6000),
    "channel_burst": (1, 1000),
    "attachment_bytes": (1, 1_000_000),
    "workers": (1, 64),
    "cache_seconds": (0, 86_400),
    "cache_size": (0, 100_000),
    "results": (1, 10),
}


def load_settings(path: Path | None = None) -> Settings:
    """Defaults, overridden by the TOML file when given. Unknown sections/keys and bad values are errors."""
    s = Settings()
    if path is None:
        return s
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise SettingsError(f"{path}: cannot read settings: {e.strerror or e}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{path}: settings file is larger than {MAX_SETTINGS_BYTES // 1000} kB")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SettingsError(f"{path}: invalid TOML: {e}") from None
    types = {f.name: f.type for f in fields(Settings)}
    for section, values in data.items():
        if section == "tokens":
            if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
                raise SettingsError(f"{path}: [tokens] must map names to strings")
            unknown = set(values) - {n for names in TOKEN_ENV.values() for n in names}
            if unknown:
                raise SettingsError(f"{path}: [tokens]: unknown key {', '.join(sorted(unknown))}")
            s.tokens = dict(values)
            continue
        if section not in _SECTIONS or not isinstance(values, dict):
            raise SettingsError(f"{path}: unknown section [{section}] (known: {', '.join([*_SECTIONS, 'tokens'])})")
        for key, value in values.items():
            if key not in _SECTIONS[section]:
                raise SettingsError(f"{path}: [{section}] unknown key {key!r} (known: {', '.join(_SECTIONS[section])})")
            setattr(s, key, _coerce(path, section, key, value, types[key]))
    if s.mode not in ("mention", "all"):
        raise SettingsError(f'{path}: [bot] mode must be "mention" or "all", got {s.mode!r}')
    return s


def _coerce(path, section: str, key: str, value: Any, typ: str) -> Any:
    where = f"{path}: [{section}] {key}"
    if typ == "bool":
        if not isinstance(value, bool):
            raise SettingsError(f"{where} must be true or false")
        return value
    if typ in ("int", "float"):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (typ == "int" and not isinstance(value, int))
        ):
            raise SettingsError(f"{where} must be a number{' (an integer)' if typ == 'int' else ''}")
        lo, hi = _BOUNDS[key]
        if not lo <= value <= hi:
            raise SettingsError(f"{where} must be between {lo} and {hi}, got {value}")
        return float(value) if typ == "float" else int(value)
    if typ.startswith("list"):
        if not isinstance(value, list):
            raise SettingsError(f"{where} must be a list of channel ids")
        return [str(v) for v in value]
    if not isinstance(value, str):
        raise SettingsError(f"{where} must be a string")
    return value
