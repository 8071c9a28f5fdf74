"""Every sentence the core puts into an answer, in English and Chinese (presenter labels: kb.present.labels).

``t(lang, key, **fields)`` formats one. A test checks that both languages have the same keys and
the same ``{fields}``, so a Chinese answer never falls back to English text.
"""

from __future__ import annotations

import string

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "no_answer": "No confident answer: this does not match anything the knowledge base covers well. "
        "The closest entries are listed below, marked as such; they may not apply.",
        "truncated": "The query was longer than {n} characters; only the first {n} were used.",
        # why a result matched (kb.ask.retrieve.Hit)
        "why.signature": "error signature /{pattern}/",
        "why.names": "names {names}",
        "why.dense": "{unit} \u201c{text}\u201d (cosine {cos})",
        "why.words": "words in {unit} \u201c{text}\u201d",
        "why.terms": "terms: {terms}",
        "why.finding": "your config triggers a finding this entry explains",
        "why.cond_match": "{key}={have} matches",
        "why.cond_mismatch": "{key}={have} but the entry needs {want}",
        "thin": "The question says too little to match on. Add the error line, when it fails (first step, backward, save, eval), or attach your ds_config / training YAML.",
        "other_tool": "The question names {names}: no entry of kb and no release in its registry knows that name. kb covers DeepSpeed, transformers, accelerate, PEFT, TRL and the front ends built on them (LLaMA-Factory, axolotl, ms-swift).",
        "unit.title": "title",
        "unit.summary": "summary",
        "unit.symptom": "symptom",
        "unit.signature": "signature",
        "unit.fix": "fix",
        "unit.myth": "myth",
        "unit.params": "parameter names",
        # versions (kb.registry.releases): names and entries judged by the user's releases
        "attachment_versions": "The attachment is a version report (pip freeze / ds_report / env output): its versions were used; it was not linted as a config.",
        "ver.renamed": "`{shown}` in {pkg} {release}; `{name}` is its spelling from {since} on",
        "ver.absent_added": "`{name}` is not in {pkg} {release}: it first appears in {since}",
        "ver.absent_removed": "`{name}` is not in {pkg} {release}: the last recorded release with it is {until}",
        "ver.spellings": "`{name}` ({pkg} {since}+); {others}",
        "ver.spelling_other": "`{name}` in {since}\u2013{until}",
        "ver.respelled": "written for {pkg} {release}: {pairs}",
        "ver.not_applies": "applies to {spec}; you run {pkg} {version}",
        "ver.judged_by": "{pkg} {version} was judged by the nearest recorded release, {release}",
        "log.used": "read the whole log ({lines} lines, {blocks} error block(s)); answered from {used}",
        "log.block": "lines {start}-{end} ({kind})",
        "log.block_rank": "lines {start}-{end} ({kind}, rank {rank})",
        "log.none": "read the whole log ({lines} lines): no error in it (no traceback, error line or failure summary)",
        "log.none_prose": "read the whole log ({lines} lines): no error in it; answered from your own words only",
        "log.kind.traceback": "traceback",
        "log.kind.error": "error line",
        "log.kind.summary": "launcher failure summary",
        "no_error_in_log": "No error in this log: it shows what a running job prints (configuration, progress, "
        "warnings) and no traceback, error line or failure summary. Paste the end of the log of the run that "
        "failed, or describe the symptom in your own words (a hang or a slowdown leaves no error line).",
        "ver.assumed": "your {dialect} config was linted at {pins}: assumed (the newest releases kb records that its front end's requirements admit; --versions takes yours)",
        "ver.newer_than_recorded": "{pkg} {version} is newer than the newest recorded release, {release}: names added since are not known",
        # answers from the registry (kb.ask.facts): a name's lifecycle, filled from its records
        "why.registry": "the registry's release history of `{name}` ({pkg})",
        "fact.fix_title": "Use the spelling of your release",
        "fact.or_earlier": "{release} or earlier (the oldest release kb records)",
        "fact.renamed.title": "`{name}` ({owner}) is replaced by `{new}` from {pkg} {release} on",
        "fact.renamed.summary": "From {release} on, {pkg} says to write `{new}`; `{name}` is in the releases kb records up to {last}.",
        "fact.renamed.yours": "Your {pkg} {user} has only `{new}`.",
        "fact.renamed.not_yet": "Your {pkg} {user} still has `{name}`.",
        "fact.renamed.fix": "Write `{new}` with {pkg} {release} or newer, `{name}` with {last} or older.",
        "fact.removed.title": "`{name}` ({owner}) is gone from {pkg} {release} on (last in {last})",
        "fact.removed.summary": "{last} is the last {pkg} release kb records with `{name}`; {release}, the next one it records, does not have it.",
        "fact.removed.yours": "Your {pkg} {user} does not have it.",
        "fact.removed.not_yet": "Your {pkg} {user} still has it.",
        "fact.removed.fix": "With {pkg} {release} or newer, leave `{name}` out only after checking what it did in your release (kb registry lookup {name}); or pin {pkg} to {last}.",
        "fact.removed.fix_repl": "With {pkg} {release} or newer, write `{repl}` instead, as {pkg}'s own message says.",
        "fact.added.title": "`{name}` ({owner}) first appears in {pkg} {release}",
        "fact.added.summary": "{pkg} releases before {release} do not have `{name}`.",
        "fact.added.yours": "Your {pkg} {user} is older: upgrade to {release} or newer to use it.",
        "fact.added.not_yet": "Your {pkg} {user} has it.",
        "fact.added.fix": "Upgrade {pkg} to {release} or newer, or leave `{name}` out.",
        "fact.option.title": "`{name}` is an option of {owner} ({pkg}, since {release})",
        "fact.option.summary": "{pkg} records `{name}` as a field of {owner} from {release} on: pass it there, not to the class the error names.",
        "fact.option.yours": "Your {pkg} {user} does not have it yet.",
        "fact.option.not_yet": "Your {pkg} {user} has it.",
        "fact.option.fix": "Set `{name}` on {owner} (with {pkg} {release} or newer).",
        "fact.deprecated.title": "`{name}` ({owner}) is deprecated in {pkg} (since {release})",
        "fact.deprecated.summary": "{pkg} still accepts `{name}` but warns that it will go.",
        "fact.deprecated.yours": "Your {pkg} {user} warns about it.",
        "fact.deprecated.not_yet": "Your {pkg} {user} does not warn about it yet.",
        "fact.deprecated.fix": "Write `{repl}{new}` instead.",
        "fact.deprecated.fix_plain": "Check the deprecation message of {pkg} for its replacement (kb registry lookup {name}).",
        # memory (kb mem inside an answer)
        "mem.assume_one_gpu": "one GPU (say how many GPUs in the question to change this)",
        "mem.assume_setup": "sequence length {seq}, {gpu_mem:g} GiB per GPU, activation checkpointing off",
        "mem.assume_count_only": "parameter count only (name a preset such as llama2-7b for activations)",
        # the user's versions (kb.registry.versions: --versions, kb env)
        "versions.empty": '--versions is empty: give pkg==version tokens, e.g. "deepspeed==0.14.4 transformers==4.46.3" '
        "(packages: {accepted})",
        "versions.bad_token": "--versions: cannot read {token!r}: write pkg==version, e.g. deepspeed==0.14.4 "
        "(packages: {accepted})",
        "versions.unknown_package": "--versions: {token!r}: unknown package {name!r}; kb reads {accepted}",
        "versions.bad_version": "--versions: {token!r}: {version!r} is not a version; write at least major.minor, "
        "e.g. 0.14 or 0.14.4 (a local label such as +cu121 is fine)",
        "versions.twice": "--versions: {token!r}: {name} was already given as {first}; give each package once",
        "versions.conflict": "{name}: using {kept} ({kept_source}), not {dropped} ({dropped_source})",
        "versions.ambiguous": "{name}: the text names several versions ({found}); none is used",
        "versions.no_registry": "no parameter registry in {path}: kb reads the versions of the packages it records "
        "(run `kb registry build`, or check $KB_DATA)",
        "versions.empty_input": "{name}: is empty; paste pip freeze, pip list, ds_report, transformers env or "
        "accelerate env output",
    },
    "zh": {
        "no_answer": "没有把握的答案：知识库里没有和这个问题足够匹配的条目。下面列出的只是最接近的条目，不一定适用。",
        "truncated": "问题超过 {n} 个字符，只用了前 {n} 个。",
        "why.signature": "报错特征 /{pattern}/",
        "why.names": "提到了参数 {names}",
        "why.dense": "{unit}“{text}”（余弦相似度 {cos}）",
        "why.words": "{unit}“{text}”中的词",
        "why.terms": "命中词：{terms}",
        "why.finding": "你的配置触发了这个条目解释的问题",
        "why.cond_match": "{key}={have} 符合",
        "why.cond_mismatch": "{key}={have}，但这个条目针对 {want}",
        "thin": "问题里可供匹配的信息太少。请补充报错那一行、在哪一步出错（第一步、反向传播、保存、评估），或者附上 ds_config / 训练 YAML。",
        "other_tool": "问题里提到的 {names}，kb 的条目和参数注册表（所有记录的版本）里都没有这个名字。kb 覆盖的是 DeepSpeed、transformers、accelerate、PEFT、TRL，以及基于它们的前端（LLaMA-Factory、axolotl、ms-swift）。",
        "unit.title": "标题",
        "unit.summary": "摘要",
        "unit.symptom": "症状",
        "unit.signature": "报错特征",
        "unit.fix": "解决办法",
        "unit.myth": "误区",
        "unit.params": "参数名",
        "attachment_versions": "附件是版本信息（pip freeze / ds_report / env 的输出）：已按其中的版本判断，没有当作配置文件检查。",
        "ver.renamed": "在 {pkg} {release} 里写作 `{shown}`；`{name}` 是 {since} 起的写法",
        "ver.absent_added": "{pkg} {release} 里没有 `{name}`：它从 {since} 才出现",
        "ver.absent_removed": "{pkg} {release} 里没有 `{name}`：记录中最后一个有它的版本是 {until}",
        "ver.spellings": "`{name}`（{pkg} {since} 起）；{others}",
        "ver.spelling_other": "{since}\u2013{until} 里是 `{name}`",
        "ver.respelled": "已按 {pkg} {release} 改写：{pairs}",
        "ver.not_applies": "适用于 {spec}；你用的是 {pkg} {version}",
        "ver.judged_by": "{pkg} {version} 按最接近的已记录版本 {release} 判断",
        "log.used": "已读完整个日志（{lines} 行，{blocks} 处报错）；依据 {used} 作答",
        "log.block": "第 {start}-{end} 行（{kind}）",
        "log.block_rank": "第 {start}-{end} 行（{kind}，rank {rank}）",
        "log.none": "已读完整个日志（{lines} 行）：里面没有报错（没有 traceback、报错行或失败汇总）",
        "log.none_prose": "已读完整个日志（{lines} 行）：里面没有报错；只根据你自己的描述作答",
        "log.kind.traceback": "调用栈（traceback）",
        "log.kind.error": "报错行",
        "log.kind.summary": "启动器的失败汇总",
        "no_error_in_log": "这个日志里没有报错：它只有正常运行时会打印的内容（配置、进度、警告），没有 traceback、"
        "报错行或失败汇总。请贴出失败那次运行的日志结尾，或者用自己的话描述现象（卡住或变慢不会留下报错行）。",
        "ver.assumed": "你的 {dialect} 配置按 {pins} 检查：这是假定的版本（kb 记录的、满足该前端依赖要求的最新版本；可用 --versions 指定你的版本）",
        "ver.newer_than_recorded": "{pkg} {version} 比已记录的最新版本 {release} 还新：之后新增的名字无法确认",
        "why.registry": "`{name}`（{pkg}）在各版本中的变化记录",
        "fact.fix_title": "按你的版本写对名字",
        "fact.or_earlier": "{release} 或更早（kb 记录的最早版本）",
        "fact.renamed.title": "`{name}`（{owner}）从 {pkg} {release} 起由 `{new}` 取代",
        "fact.renamed.summary": "从 {release} 起 {pkg} 要求改写成 `{new}`；kb 记录中 `{name}` 只到 {last}。",
        "fact.renamed.yours": "你的 {pkg} {user} 里只有 `{new}`。",
        "fact.renamed.not_yet": "你的 {pkg} {user} 里还是 `{name}`。",
        "fact.renamed.fix": "{pkg} {release} 及以后写 `{new}`，{last} 及以前写 `{name}`。",
        "fact.removed.title": "`{name}`（{owner}）从 {pkg} {release} 起没有了（最后出现在 {last}）",
        "fact.removed.summary": "kb 记录的 {pkg} 版本中，最后一个有 `{name}` 的是 {last}；紧接着记录的 {release} 已经没有它。",
        "fact.removed.yours": "你的 {pkg} {user} 里没有它。",
        "fact.removed.not_yet": "你的 {pkg} {user} 里还有它。",
        "fact.removed.fix": "用 {pkg} {release} 及以后的版本时，先确认它在你原来的版本里起什么作用（kb registry lookup {name}）再去掉；或者把 {pkg} 固定在 {last}。",
        "fact.removed.fix_repl": "用 {pkg} {release} 及以后的版本时，按 {pkg} 自己的提示改写成 `{repl}`。",
        "fact.added.title": "`{name}`（{owner}）从 {pkg} {release} 才有",
        "fact.added.summary": "{release} 之前的 {pkg} 版本没有 `{name}`。",
        "fact.added.yours": "你的 {pkg} {user} 更旧：要用它需升级到 {release} 或更新。",
        "fact.added.not_yet": "你的 {pkg} {user} 里有它。",
        "fact.added.fix": "把 {pkg} 升级到 {release} 或更新，或者不用 `{name}`。",
        "fact.option.title": "`{name}` 是 {owner} 的参数（{pkg}，自 {release} 起）",
        "fact.option.summary": "kb 记录的 {pkg} 从 {release} 起把 `{name}` 作为 {owner} 的字段：应该传给它，而不是报错里的那个类。",
        "fact.option.yours": "你的 {pkg} {user} 里还没有它。",
        "fact.option.not_yet": "你的 {pkg} {user} 里有它。",
        "fact.option.fix": "在 {owner} 里设置 `{name}`（需要 {pkg} {release} 或更新）。",
        "fact.deprecated.title": "`{name}`（{owner}）在 {pkg} 中已弃用（自 {release} 起）",
        "fact.deprecated.summary": "{pkg} 仍接受 `{name}`，但会警告它将被移除。",
        "fact.deprecated.yours": "你的 {pkg} {user} 会对它发出警告。",
        "fact.deprecated.not_yet": "你的 {pkg} {user} 还不会警告。",
        "fact.deprecated.fix": "改写成 `{repl}{new}`。",
        "fact.deprecated.fix_plain": "查看 {pkg} 的弃用提示找到替代写法（kb registry lookup {name}）。",
        "mem.assume_one_gpu": "按单卡计算（在问题里写明卡数即可改变）",
        "mem.assume_setup": "序列长度 {seq}，每张卡 {gpu_mem:g} GiB，未开启激活检查点",
        "mem.assume_count_only": "只知道参数量（写出预设名如 llama2-7b 才能估算激活）",
        "versions.empty": '--versions 为空：请写成 包名==版本，例如 "deepspeed==0.14.4 transformers==4.46.3"（可用的包：{accepted}）',
        "versions.bad_token": "--versions：无法识别 {token!r}：请写成 包名==版本，例如 deepspeed==0.14.4（可用的包：{accepted}）",
        "versions.unknown_package": "--versions：{token!r} 中的包名 {name!r} 不认识；kb 只识别 {accepted}",
        "versions.bad_version": "--versions：{token!r} 中的 {version!r} 不是版本号；至少写到次版本号，"
        "例如 0.14 或 0.14.4（可以带 +cu121 这类本地标签）",
        "versions.twice": "--versions：{token!r}：{name} 前面已经给过版本 {first}；每个包只写一次",
        "versions.conflict": "{name}：采用 {kept}（{kept_source}），未采用 {dropped}（{dropped_source}）",
        "versions.ambiguous": "{name}：文本里出现了多个版本（{found}），一个都没有采用",
        "versions.no_registry": "{path} 中没有参数注册表：kb 只读取注册表中记录的包的版本"
        "（请运行 `kb registry build`，或检查 $KB_DATA）",
        "versions.empty_input": "{name}：内容为空；请粘贴 pip freeze、pip list、ds_report、transformers env 或 "
        "accelerate env 的输出",
    },
}


def t(lang: str, key: str, /, **fields: object) -> str:
    table = MESSAGES.get(lang, MESSAGES["en"])
    return table.get(key, MESSAGES["en"][key]).format(**fields)


def fields_of(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}
