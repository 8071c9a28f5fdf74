"""What the bots say when they do not answer with an entry: always a reason, in the user's language."""

from __future__ import annotations

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "rate_limited_user": "You are asking faster than I can answer well: try again in {seconds} s.",
        "rate_limited_channel": "This channel is asking a lot right now: try again in {seconds} s.",
        "not_allowed": "kb is not enabled in this channel. Ask an admin to add it to allow_channels.",
        "empty": 'Tell me the symptom or paste the error, e.g. "zero3 oom first step".',
        "attachment_too_big": "The attachment {name} is {size} KB; the limit is {limit} KB. Paste only the config.",
        "attachment_type": "The attachment {name} is not a text file (ds_config.json, a YAML, a launch script); I only read text.",
        "attachment_encoding": "The attachment {name} is not UTF-8 (or GBK) text.",
        "bad_input": "I could not read that: {reason}",
        "internal_error": "Something went wrong on my side (error id {error_id}); the maintainers can find it in the log.",
        "unknown_entry": "There is no entry {entry_id!r}.",
        "truncated": "The answer was longer than {platform} allows: {dropped} more part(s) are in `kb show {entry_id}`.",
        "thanks": "Thanks, noted.",
        "thanks_reason": "Thanks: noted as \u201c{reason}\u201d.",
        "reason.didnt_fix": "didn't fix it",
        "reason.wrong_version": "wrong version",
        "reason.different_error": "different error",
        "reason.unclear": "unclear",
    },
    "zh": {
        "rate_limited_user": "你问得太快了，我来不及好好回答：请 {seconds} 秒后再试。",
        "rate_limited_channel": "这个频道现在提问太多：请 {seconds} 秒后再试。",
        "not_allowed": "这个频道没有启用 kb。请管理员把它加到 allow_channels。",
        "empty": "请描述症状或贴出报错，例如“ZeRO-3第一步就OOM”。",
        "attachment_too_big": "附件 {name} 有 {size} KB，上限是 {limit} KB。请只贴配置文件。",
        "attachment_type": "附件 {name} 不是文本文件（ds_config.json、YAML、启动脚本）；我只读取文本。",
        "attachment_encoding": "附件 {name} 不是 UTF-8（或 GBK）编码的文本。",
        "bad_input": "无法读取：{reason}",
        "internal_error": "我这边出错了（错误编号 {error_id}），维护者可以在日志里找到它。",
        "unknown_entry": "没有条目 {entry_id!r}。",
        "truncated": "回答超出了 {platform} 的长度限制：还有 {dropped} 部分，请用 `kb show {entry_id}` 查看。",
        "thanks": "谢谢，已记录。",
        "thanks_reason": "谢谢：已记录为“{reason}”。",
        "reason.didnt_fix": "没解决问题",
        "reason.wrong_version": "版本不对",
        "reason.different_error": "不是同一个报错",
        "reason.unclear": "看不懂",
    },
}


def msg(lang: str, key: str, /, **fields: object) -> str:
    return MESSAGES["zh" if lang == "zh" else "en"][key].format(**fields)
