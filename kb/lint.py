"""``kb lint``: what a DeepSpeed / accelerate / TrainingArguments config or launch command really does.

Deterministic rules over the parsed config and the parameter registry; no DeepSpeed at run time.
Each rule's verdict about validity is proven against DeepSpeed's own config classes in
``tests/test_lint_oracle.py``. Rule codes (see ``RULES``) are stable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kb.configs import ParsedConfig, _int
from kb.registry import Registry

# code -> (severity, short name, entry that explains it)
RULES: dict[str, tuple[str, str, str | None]] = {
    "KB001": ("error", "unknown-key", "unknown-config-keys-silently-ignored"),
    "KB002": ("error", "misplaced-key", "unknown-config-keys-silently-ignored"),
    "KB003": ("warning", "deprecated-key", "deprecated-cpu-offload-keys"),
    "KB004": ("error", "removed-key", "unknown-config-keys-silently-ignored"),
    "KB005": ("warning", "silently-ignored", "unknown-config-keys-silently-ignored"),
    "KB006": ("error", "invalid-value", "unknown-config-keys-silently-ignored"),
    "KB007": ("warning", "auto-value", "auto-values-outside-trainer"),
    "KB008": ("warning", "offload-without-device", "offload-block-without-device"),
    "KB009": ("error", "nvme-without-path", "nvme-offload-setup"),
    "KB010": ("warning", "offload-param-below-stage3", "offload-param-ignored-below-stage3"),
    "KB011": ("error", "bf16-and-fp16", "bf16-and-fp16-both-enabled"),
    "KB012": ("error", "batch-arithmetic", "batch-size-assertion"),
    "KB013": ("warning", "large-buckets-overlap-comm", "zero-bucket-sizes-overlap-comm"),
    "KB014": ("error", "cannot-fit-single-gpu", "zero3-single-gpu-no-offload"),
    "KB015": ("warning", "deepspeed-key-in-accelerate-yaml", "unknown-config-keys-silently-ignored"),
    "KB016": ("warning", "ds-activation-checkpointing-with-hf", "hf-activation-checkpointing-vs-ds-section"),
    "KB017": ("error", "partial-offload-below-stage3", "offload-param-ignored-below-stage3"),
    "KB018": ("error", "deprecated-and-replacement-together", "deprecated-cpu-offload-keys"),
    "KB019": ("info", "coerced-value", None),
    "KB020": ("warning", "nvme-below-stage3", "nvme-offload-setup"),
    "KB021": ("warning", "unknown-flag", None),
}
ENTRY_FOR_NAME = {"nvme_path": "nvme-offload-setup", "zero_force_ds_cpu_optimizer": "zero-force-ds-cpu-optimizer"}
FREE_FORM = (
    "optimizer.params",
    "scheduler.params",
    "zero_optimization.leaf_module.classes",
    "zero_optimization.leaf_module.names",
    "zero_optimization.leaf_module.name_suffixes",
)
# ZeRO-1/2 keep one gradient bucket of reduce_bucket_size elements, two with overlap_comm
# (deepspeed 0.19.8 runtime/zero/stage_1_and_2.py:3256-3280); warn when that doubles past 1 GB
BUCKET_WARN_BYTES = 1 << 30


@dataclass
class Finding:
    code: str
    severity: str
    path: str
    line: int | None
    message: str
    suggestion: str | None = None
    entry: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Linter:
    def __init__(
        self, cfg: ParsedConfig, reg: Registry, world_size: int | None, model_params: float | None, gpu_mem_gib: float
    ):
        self.cfg, self.reg = cfg, reg
        self.world_size, self.model_params, self.gpu_mem_gib = world_size, model_params, gpu_mem_gib
        self.out: list[Finding] = []
        self.hf = False  # True when the config is known to go through the HF Trainer

    def add(
        self,
        code: str,
        path: str,
        message: str,
        suggestion: str | None = None,
        entry: str | None = None,
        line_path: str | None = None,
    ) -> None:
        sev, _, default_entry = RULES[code]
        self.out.append(
            Finding(code, sev, path, self.cfg.line(line_path or path), message, suggestion, entry or default_entry)
        )

    # ------------------------------------------------------------ DeepSpeed JSON

    def deepspeed(self, d: dict[str, Any], prefix: str = "") -> None:
        """Lint a DeepSpeed config dict; ``prefix`` is where it sits in the file (e.g. "deepspeed.")."""
        self._keys(d, "", prefix)
        self._semantics(d, prefix)

    def _keys(self, d: dict[str, Any], parent: str, prefix: str) -> None:
        reg = self.reg
        parent_rec = reg.get(f"deepspeed:{parent}") if parent else None
        strict = bool(parent_rec and parent_rec.get("forbids_unknown"))
        for key, value in d.items():
            key = str(key)
            path = f"{parent}.{key}" if parent else key
            shown = prefix + path
            if path.startswith(FREE_FORM):
                continue
            lk = reg.resolve(key, context=parent or None, package="deepspeed")
            if parent == "" and lk.status != "unknown" and lk.record and "." in lk.record["path"]:
                lk.status = "misplaced"
                lk.candidates = [lk.record]
            rec = lk.record if lk.status in ("exact", "alias", "deprecated", "removed") else None
            if rec is None:
                self._unknown(key, path, shown, parent, strict, lk)
                continue
            if lk.status == "removed":
                self.add(
                    "KB004",
                    shown,
                    f"`{path}` was removed: DeepSpeed {rec['version']} raises "
                    f"DeepSpeedConfigError for it ({rec['doc'] or 'removed feature'}).",
                    "delete it",
                )
                continue
            if lk.status == "deprecated":
                self._deprecated(rec, path, shown, d)
            if lk.status == "alias":
                self.add(
                    "KB019",
                    shown,
                    f"`{path}` is accepted as an alias of `{rec['path']}`.",
                    f"write `{rec['path'].rsplit('.', 1)[-1]}`",
                )
            if isinstance(value, dict) and rec["kind"] == "config_section":
                self._keys(value, rec["path"], prefix)
            elif value == "auto":
                self._auto(rec, shown)
            elif rec.get("validated"):
                self._value(rec, value, shown)

    def _unknown(self, key: str, path: str, shown: str, parent: str, strict: bool, lk) -> None:
        where = [c["path"] for c in lk.candidates if c["kind"] in ("config_key", "config_section")]
        entry = ENTRY_FOR_NAME.get(key)
        if lk.status == "misplaced" and where:
            effect = (
                "DeepSpeed raises ValidationError (Extra inputs are not permitted)"
                if strict
                else "DeepSpeed never reads it there, so it does nothing"
            )
            self.add(
                "KB002",
                shown,
                f"`{key}` is not valid under `{parent or 'the top level'}`: {effect}. "
                f"It belongs at {', '.join(f'`{w}`' for w in where)}.",
                f"move it to `{where[0]}`",
                entry,
            )
            return
        other = (
            f" It is a {lk.record['kind']} ({lk.record['id']}), not a DeepSpeed config key."
            if (lk.status == "not-a-config-key" and lk.record)
            else ""
        )
        near = self.reg.suggest(path, config_only=True, cutoff=62.0)
        hint = f"did you mean {', '.join(f'`{s}`' for s in near)}?" if near else "delete it"
        if strict:
            self.add(
                "KB001",
                shown,
                f"`{key}` does not exist under `{parent}`: DeepSpeed raises ValidationError "
                f"(Extra inputs are not permitted).{other}",
                hint,
                entry,
            )
        elif parent == "":
            self.add(
                "KB005",
                shown,
                f"`{key}` is not a DeepSpeed config key: at the top level DeepSpeed silently "
                f"ignores unknown keys, so this setting does nothing.{other}",
                hint,
                entry,
            )
        else:
            self.add(
                "KB005",
                shown,
                f"`{key}` is not read by DeepSpeed under `{parent}` (this section is not "
                f"validated, so the typo is silently ignored).{other}",
                hint,
                entry,
            )

    def _deprecated(self, rec: dict, path: str, shown: str, siblings: dict) -> None:
        repl = rec.get("replacement")
        if rec.get("noop"):
            msg = f"`{path}` is deprecated and does nothing: DeepSpeed only logs a warning."
        else:
            msg = f"`{path}` is deprecated; DeepSpeed maps it to `{repl}` with a warning."
        self.add("KB003", shown, msg, f"use `{repl}`" if repl else "delete it")
        # cpu_offload + offload_optimizer (or cpu_offload_param + offload_param): AssertionError
        if repl and not rec.get("noop") and repl in siblings:
            self.add(
                "KB018",
                shown,
                f"`{path}` and its replacement `{repl}` are both set: DeepSpeed raises "
                f"AssertionError (Cannot provide deprecated parameter and replacing parameter together).",
                f"delete `{rec['name']}`",
            )

    def _auto(self, rec: dict, shown: str) -> None:
        fillers = sorted({r["package"] for r in self.reg.auto_fill.get(rec["path"], [])})
        default = rec["default"]
        if rec.get("validated"):
            raw = f"drops it and uses the default ({default})"
        elif rec["path"] in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
            raw = "raises TypeError in its batch-size check"
        else:
            raw = 'keeps the string "auto", which breaks where the value is used'
        if fillers and "transformers" in fillers and self.hf:
            return  # the HF Trainer fills it: nothing to say
        if fillers:
            self.add(
                "KB007",
                shown,
                f'"auto" for `{rec["path"]}` is filled by {" and ".join(fillers)} only; '
                f"plain deepspeed.initialize {raw}.",
                "fine with the HF Trainer / accelerate; otherwise set it explicitly",
            )
        else:
            self.add(
                "KB007",
                shown,
                f'Nothing fills "auto" for `{rec["path"]}` (not transformers, not accelerate): DeepSpeed {raw}.',
                "write a value" + (f", or delete it to get {default}" if rec.get("validated") else ""),
            )

    def _value(self, rec: dict, value: Any, shown: str) -> None:
        err, coerced = check_value(rec, value)
        if err:
            self.add(
                "KB006",
                shown,
                f"`{rec['path']}` = {value!r}: {err}. DeepSpeed raises ValidationError.",
                f"expected {rec['type']}" + (f" in {rec['choices']}" if rec.get("choices") else ""),
            )
        elif coerced is not None and coerced != value:
            self.add(
                "KB019",
                shown,
                f"`{rec['path']}` = {value!r} is accepted and converted to {coerced!r}.",
                f"write {json_literal(coerced)}",
            )

    def _semantics(self, d: dict[str, Any], prefix: str) -> None:
        z = d.get("zero_optimization") if isinstance(d.get("zero_optimization"), dict) else {}
        stage = _int(z.get("stage", 0)) or 0
        for blk in ("offload_optimizer", "offload_param"):
            b = z.get(blk)
            path = f"zero_optimization.{blk}"
            if not isinstance(b, dict):
                continue
            dev = b.get("device", "none")
            if "device" not in b:
                self.add(
                    "KB008",
                    prefix + path,
                    f'`{path}` has no "device": the code default is "none", so nothing '
                    "is offloaded (the docs say cpu).",
                    'add "device": "cpu"',
                )
            if dev == "nvme" and not b.get("nvme_path"):
                self.add(
                    "KB009",
                    prefix + path + ".device",
                    f'`{path}.device` is "nvme" but no `nvme_path` is set: '
                    "DeepSpeed crashes at initialization (os.path.join on None, or an assertion under zero.Init).",
                    f'add "nvme_path": "/local_nvme" inside `{blk}`',
                )
            if blk == "offload_param" and dev in ("cpu", "nvme") and stage < 3:
                self.add(
                    "KB010",
                    prefix + path,
                    f"`offload_param` is only used by ZeRO-3; at stage {stage} it is "
                    "silently ignored (parameters stay on the GPU).",
                    "use stage 3, or offload only the optimizer",
                )
            if blk == "offload_optimizer" and dev == "nvme" and stage in (1, 2):
                self.add(
                    "KB020",
                    prefix + path + ".device",
                    f'at stage {stage}, "nvme" optimizer offload behaves as CPU offload (ZeRO-1/2 have no NVMe path).',
                    "use stage 3 for NVMe offload",
                )
            ratio = b.get("ratio")
            if (
                blk == "offload_optimizer"
                and isinstance(ratio, (int, float))
                and not isinstance(ratio, bool)
                and ratio < 1
                and stage < 3
            ):
                self.add(
                    "KB017",
                    prefix + path + ".ratio",
                    f"partial offload (ratio {ratio}) needs ZeRO-3: DeepSpeed "
                    "raises ValidationError (Partial offloading only supported for ZeRO Stage 3).",
                    "set ratio 1.0 or use stage 3",
                )
        bf, fp = d.get("bf16") or d.get("bfloat16"), d.get("fp16")
        if isinstance(bf, dict) and isinstance(fp, dict) and bf.get("enabled") is True and fp.get("enabled") is True:
            self.add(
                "KB011",
                prefix + "fp16.enabled",
                "bf16 and fp16 are both enabled: DeepSpeed raises AssertionError "
                "(bfloat16 and fp16 modes cannot be simultaneously enabled).",
                "keep one (bf16 on Ampere or newer)",
            )
        self._batch(d, prefix)
        if stage in (1, 2) and _truthy(z.get("overlap_comm")):
            bucket = z.get("reduce_bucket_size", 500_000_000)
            if isinstance(bucket, (int, float)) and not isinstance(bucket, bool):
                nbytes = 2 * int(bucket) * 2
                if nbytes >= BUCKET_WARN_BYTES:
                    self.add(
                        "KB013",
                        prefix + "zero_optimization.overlap_comm",
                        f"with overlap_comm at stage {stage}, "
                        f"ZeRO keeps two gradient buckets of reduce_bucket_size={int(bucket):,} elements: "
                        f"{nbytes / 2**30:.1f} GiB of GPU memory in 16-bit.",
                        'reduce_bucket_size 2e8 (or HF "auto"), or overlap_comm false',
                    )
        if "activation_checkpointing" in d:
            self.add(
                "KB016",
                prefix + "activation_checkpointing",
                "the `activation_checkpointing` section only configures "
                "deepspeed.checkpointing (Megatron-style code); Hugging Face models never call it, so it saves "
                "nothing there.",
                "use TrainingArguments gradient checkpointing / model.gradient_checkpointing_enable()",
            )
        self._fit(d, z, stage, prefix)

    def _batch(self, d: dict[str, Any], prefix: str) -> None:
        tbs, mbs, gas = (
            d.get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
        )
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (tbs, mbs)):
            return
        gas = gas if isinstance(gas, int) and not isinstance(gas, bool) else 1
        if self.world_size:
            if tbs != mbs * gas * self.world_size:
                self.add(
                    "KB012",
                    prefix + "train_batch_size",
                    f"train_batch_size {tbs} != micro {mbs} x accumulation "
                    f"{gas} x world size {self.world_size} = {mbs * gas * self.world_size}: DeepSpeed raises "
                    "AssertionError (Check batch related parameters).",
                    'set it to the product, or drop it (or "auto" with HF)',
                )
        elif tbs % (mbs * gas):
            self.add(
                "KB012",
                prefix + "train_batch_size",
                f"train_batch_size {tbs} is not a multiple of micro {mbs} x "
                f"accumulation {gas}: no world size makes DeepSpeed's batch check pass.",
                "fix the three numbers",
            )

    def _fit(self, d: dict[str, Any], z: dict, stage: int, prefix: str) -> None:
        if not self.model_params or self.world_size != 1:
            return  # only a single GPU is certain to hold everything; the caller must say so
        opt_dev = (
            (z.get("offload_optimizer") or {}).get("device", "none")
            if isinstance(z.get("offload_optimizer"), dict)
            else "none"
        )
        if opt_dev != "none":
            return
        p = self.model_params
        # DeepSpeed's model-state estimators on one GPU (largest layer term omitted: a lower bound)
        need = 18 * p if stage == 3 else (20 * p if stage in (1, 2) else 16 * p)
        if need / 2**30 > self.gpu_mem_gib:
            self.add(
                "KB014",
                prefix + "zero_optimization",
                f"{p / 1e9:.1f}B parameters with Adam at ZeRO stage {stage} on one "
                f"GPU need at least {need / 2**30:.0f} GiB for model states alone (DeepSpeed's estimator: "
                f"{'18' if stage == 3 else '20' if stage else '16'} bytes/param), more than {self.gpu_mem_gib:g} GiB. "
                "With one GPU, ZeRO has nothing to partition across.",
                "offload the optimizer (and params at stage 3), or use LoRA",
            )

    # ------------------------------------------------------------ accelerate YAML, TrainingArguments, command lines

    def accelerate(self, d: dict[str, Any]) -> None:
        for key in d:
            if self.reg.get(f"accelerate:yaml.{key}") is None:
                near = self.reg.suggest(f"yaml.{key}")
                self.add(
                    "KB001",
                    str(key),
                    f"`{key}` is not an accelerate config key: accelerate raises ValueError "
                    "(unknown keys) when it loads this file.",
                    f"did you mean {', '.join(near)}?" if near else "delete it",
                )
        ds = d.get("deepspeed_config")
        if not isinstance(ds, dict):
            return
        for key in ds:
            path = f"deepspeed_config.{key}"
            if self.reg.get(f"accelerate:yaml/{path}") is not None:
                continue
            if (
                self.reg.get(f"deepspeed:{key}") is not None
                or self.reg.resolve(str(key), package="deepspeed").status != "unknown"
            ):
                self.add(
                    "KB015",
                    path,
                    f"`{key}` is a DeepSpeed JSON key; accelerate does not pass it from the YAML to "
                    "DeepSpeed, so it is ignored.",
                    "put it in a DeepSpeed JSON and point `deepspeed_config_file` at it",
                )
            else:
                self.add(
                    "KB005",
                    path,
                    f"`{key}` is not a key accelerate reads under `deepspeed_config`; it is ignored.",
                    "see `accelerate config` for the valid keys",
                )
        if (
            isinstance(value := ds.get("zero3_init_flag"), bool)
            and value
            and _int(ds.get("zero_stage")) not in (3, None)
        ):
            self.add(
                "KB005",
                "deepspeed_config.zero3_init_flag",
                "zero3_init_flag only applies to ZeRO stage 3; accelerate turns it off with a warning at other stages.",
                "remove it or use zero_stage 3",
                entry="accelerate-zero3-init-flag",
            )

    def training_args(self, d: dict[str, Any]) -> None:
        for key, _value in d.items():
            rec = self.reg.get(f"transformers:TrainingArguments.{key}")
            if rec is None:
                continue  # LLaMA-Factory-style files mix model/data arguments of their own
            if rec.get("deprecated"):
                self.add(
                    "KB003",
                    str(key),
                    f"`{key}` is deprecated in transformers {rec['version']}: {rec['doc'] or ''}".strip(),
                    None,
                    "hf-activation-checkpointing-vs-ds-section" if "checkpointing" in key else None,
                )
        ds = d.get("deepspeed")
        if isinstance(ds, dict):
            self.hf = True  # the HF Trainer fills its "auto" keys
            self.deepspeed(ds, prefix="deepspeed.")

    def launch(self, d: dict[str, Any]) -> None:
        launcher = d["launcher"]
        cli = {"deepspeed": "deepspeed", "accelerate launch": "accelerate launch"}.get(launcher)
        if cli:
            for flag in d["launcher_args"]:
                if self.reg.get(f"{cli.split()[0]}:cli/{cli}/--{flag}") is None:
                    self.add(
                        "KB021",
                        f"launcher_args.{flag}",
                        f"`--{flag}` is not a `{cli}` option.",
                        "check `" + cli + " --help`",
                    )
        if (
            launcher == "deepspeed"
            and "CUDA_VISIBLE_DEVICES" in d["env"]
            and ({"include", "exclude", "num_gpus"} & set(d["launcher_args"]))
        ):
            self.add(
                "KB005",
                "env.CUDA_VISIBLE_DEVICES",
                "the deepspeed launcher ignores CUDA_VISIBLE_DEVICES when "
                "--include/--exclude/--num_gpus is given and sets it per worker itself.",
                "select GPUs with --include localhost:0,1 only",
                entry="deepspeed-launcher-include-gpus",
            )
        for flag, _value in d["script_args"].items():
            rec = self.reg.get(f"transformers:TrainingArguments.{flag}")
            if rec is not None and rec.get("deprecated"):
                self.add(
                    "KB003", f"script_args.{flag}", f"`--{flag}` is deprecated in transformers {rec['version']}.", None
                )


def lint_config(
    cfg: ParsedConfig,
    registry: Registry,
    world_size: int | None = None,
    model_params: float | None = None,
    gpu_mem_gib: float = 80.0,
) -> list[Finding]:
    """All findings for one parsed config, in file order."""
    lt = _Linter(cfg, registry, world_size, model_params, gpu_mem_gib)
    {
        "deepspeed": lt.deepspeed,
        "accelerate": lt.accelerate,
        "training_args": lt.training_args,
        "launch": lt.launch,
    }.get(cfg.kind, lt.deepspeed)(cfg.data)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(lt.out, key=lambda f: (f.line or 0, order[f.severity], f.path))


# ---------------------------------------------------------------- value checks (pydantic, as DeepSpeed does)


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def check_value(rec: dict, value: Any) -> tuple[str | None, Any]:
    """Validate like DeepSpeed's pydantic models (lax mode). Returns (error, coerced value)."""
    from pydantic import TypeAdapter, ValidationError

    t = rec.get("type") or ""
    optional = t.startswith("Optional[") or t.endswith("| None")
    base = t.removeprefix("Optional[").removesuffix("]").replace(" | None", "").strip()
    if value is None:
        return (None, None) if optional or rec.get("default") in ("null", None) else ("null is not allowed", None)
    if rec.get("choices"):
        choices = rec["choices"]
        cand = value
        if isinstance(value, str) and all(isinstance(c, int) for c in choices):
            try:
                cand = int(value)
            except ValueError:
                return f"must be one of {choices}", None
        if cand not in choices or isinstance(cand, bool):
            return f"must be one of {choices}", None
        return None, cand
    py = _TYPES.get(base)
    if py is None:
        return None, None
    try:
        coerced = TypeAdapter(py).validate_python(value)
    except ValidationError as e:
        return e.errors()[0]["msg"].lower(), None
    for k, bound in (rec.get("constraints") or {}).items():
        ok = {"gt": coerced > bound, "ge": coerced >= bound, "lt": coerced < bound, "le": coerced <= bound}[k]
        if not ok:
            return f"must be {'>' if k == 'gt' else '>=' if k == 'ge' else '<' if k == 'lt' else '<='} {bound}", None
    return None, coerced


def json_literal(v: Any) -> str:
    import json

    return json.dumps(v)


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() in ("true", "yes", "1"))
