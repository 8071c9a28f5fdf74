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
        # why a result matched (kb.retrieve.Hit)
        "why.signature": "error signature /{pattern}/",
        "why.names": "names {names}",
        "why.dense": "{unit} \u201c{text}\u201d (cosine {cos})",
        "why.words": "words in {unit} \u201c{text}\u201d",
        "why.terms": "terms: {terms}",
        "why.finding": "your config triggers a finding this entry explains",
        "why.cond_match": "{key}={have} matches",
        "why.cond_mismatch": "{key}={have} but the entry needs {want}",
        "unit.title": "title",
        "unit.summary": "summary",
        "unit.symptom": "symptom",
        "unit.signature": "signature",
        "unit.fix": "fix",
        "unit.myth": "myth",
        "unit.params": "parameter names",
        # memory (kb mem inside an answer)
        "mem.assume_one_gpu": "one GPU (say how many GPUs in the question to change this)",
        "mem.assume_setup": "sequence length {seq}, {gpu_mem:g} GiB per GPU, activation checkpointing off",
        "mem.assume_count_only": "parameter count only (name a preset such as llama2-7b for activations)",
        "mem.term.model_states": "model states (DeepSpeed estimator)",
        "mem.term.param_partition": "16-bit parameter partition (not in DeepSpeed's ZeRO-3 formula)",
        "mem.term.contiguous_grad": "ZeRO-3 contiguous gradient buffer",
        "mem.term.prefetch": "ZeRO-3 prefetch bucket",
        "mem.term.reduce_bucket": "ZeRO-1/2 reduce bucket",
        "mem.term.activations": "activations",
        "mem.term.activations_ckpt": "activations (checkpointed)",
        "mem.term.logits": "logits and loss",
        "mem.term.lora_base": "frozen base weights",
        "mem.term.lora_adapters": "adapter weights + grads + Adam states",
        "mem.term.host_model_states": "model states (DeepSpeed estimator, x1.5 buffer)",
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
        "unit.title": "标题",
        "unit.summary": "摘要",
        "unit.symptom": "症状",
        "unit.signature": "报错特征",
        "unit.fix": "解决办法",
        "unit.myth": "误区",
        "unit.params": "参数名",
        "mem.assume_one_gpu": "按单卡计算（在问题里写明卡数即可改变）",
        "mem.assume_setup": "序列长度 {seq}，每张卡 {gpu_mem:g} GiB，未开启激活检查点",
        "mem.assume_count_only": "只知道参数量（写出预设名如 llama2-7b 才能估算激活）",
        "mem.term.model_states": "模型状态（DeepSpeed 估算公式）",
        "mem.term.param_partition": "16 位参数分片（DeepSpeed 的 ZeRO-3 公式未计入）",
        "mem.term.contiguous_grad": "ZeRO-3 连续梯度缓冲区",
        "mem.term.prefetch": "ZeRO-3 预取缓冲区",
        "mem.term.reduce_bucket": "ZeRO-1/2 归约缓冲区",
        "mem.term.activations": "激活值",
        "mem.term.activations_ckpt": "激活值（已开启检查点）",
        "mem.term.logits": "logits 和 loss",
        "mem.term.lora_base": "冻结的基座权重",
        "mem.term.lora_adapters": "适配器权重 + 梯度 + Adam 状态",
        "mem.term.host_model_states": "模型状态（DeepSpeed 估算公式，含 1.5 倍余量）",
    },
}


def t(lang: str, key: str, /, **fields: object) -> str:
    table = MESSAGES.get(lang, MESSAGES["en"])
    return table.get(key, MESSAGES["en"][key]).format(**fields)


def fields_of(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}
