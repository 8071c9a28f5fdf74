"""``kb stats``: coverage of the knowledge base (areas, languages, parameters, myths, sources)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kb.content.entries import Entry
from kb.registry.store import CONFIG_KINDS, Registry


def coverage(entries: list[Entry], reg: Registry) -> dict[str, Any]:
    used: set[str] = set()
    for e in entries:
        used.update(e.all_params())
        for m in e.myths:
            for n in m.names:
                lk = reg.resolve(n.name, context=n.at)
                if lk.record:
                    used.add(lk.record["id"])
    ds_config = [r for r in reg.records if r["package"] == "deepspeed" and r["kind"] in CONFIG_KINDS]
    unused_config = sorted(r["id"] for r in ds_config if r["id"] not in used)
    by_pkg_used = Counter(rid.split(":", 1)[0] for rid in used if rid in reg.by_id)
    lang = {
        "entries": len(entries),
        "symptoms_en": sum(len(e.symptoms.en) for e in entries),
        "symptoms_zh": sum(len(e.symptoms.zh) for e in entries),
        "queries_en": sum(len(e.queries.en) for e in entries),
        "queries_zh": sum(len(e.queries.zh) for e in entries),
        "entries_with_2plus_zh_queries": sum(len(e.queries.zh) >= 2 for e in entries),
        "entries_with_2plus_symptoms_each_language": sum(
            len(e.symptoms.en) >= 2 and len(e.symptoms.zh) >= 2 for e in entries
        ),
    }
    return {
        "entries": len(entries),
        "by_area": dict(sorted(Counter(e.area for e in entries).items(), key=lambda kv: (-kv[1], kv[0]))),
        "topics": len({t for e in entries for t in e.topics}),
        "languages": lang,
        "params_used": len(used),
        "params_used_by_package": dict(sorted(by_pkg_used.items())),
        "registry_records": len(reg.records),
        "deepspeed_config_keys": len(ds_config),
        "deepspeed_config_keys_unused": len(unused_config),
        "deepspeed_config_keys_unused_list": unused_config,
        "myths": sum(len(e.myths) for e in entries),
        "myth_names": dict(Counter(n.verdict for e in entries for m in e.myths for n in m.names)),
        "sources": dict(Counter(s.type for e in entries for s in e.sources)),
        "withdrawn": sum(e.withdrawn is not None for e in entries),
    }
