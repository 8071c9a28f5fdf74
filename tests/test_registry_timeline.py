"""The release timeline (indexer/registry_static.py, indexer/registry_timeline.py; docs/registry.md, "Every minor
release: the timeline").

Four parts: the static reader on small source trees written here; the committed timeline files' shape; their
agreement with the import-built registry at the sampled releases (every difference explained); and facts read
from the committed files, each checked by hand in the release's own source (the file and line are named).
"""

import json
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from indexer import registry_timeline as rt
from indexer.registry_static import DictReads, Tree, default_text, first_sentence
from kb.registry.store import KINDS

TIMELINE = Path(__file__).resolve().parent.parent / "data" / "registry" / "timeline"
PACKAGES = sorted(rt.WINDOWS)


def _tree(tmp_path: Path, files: dict[str, str], package: str = "pkg") -> Tree:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return Tree(tmp_path, package)


# ---------------------------------------------------------------- the reader, on inline trees


def test_dataclass_with_mixin_and_external_base(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .args import Args\n",
            "pkg/base.py": """
                from dataclasses import dataclass, field

                @dataclass
                class Mixin:
                    lora_rank: int = field(default=8, metadata={"help": "The rank. Bigger is slower."})
                    old_name: str = field(default="x", metadata={"help": "Deprecated, use `new_name`."})
            """,
            "pkg/args.py": """
                import warnings
                from dataclasses import dataclass, field
                from typing import Optional
                from transformers import TrainingArguments
                from .base import Mixin
                LIMIT = 2 ** 10

                @dataclass
                class Args(Mixin, TrainingArguments):
                    new_name: Optional[str] = None
                    limit: int = LIMIT
                    lora_rank: int = 16
                    computed: int = field(default_factory=lambda: compute())
                    targets: list = field(default_factory=lambda: ["q", "v"])
                    legacy: bool = False
                    required: str = field(metadata={"help": "No default."})

                    def __post_init__(self):
                        if self.legacy:
                            warnings.warn("`legacy` is deprecated and will be removed. Use `new_name` instead.")
            """,
        },
    )
    ref = t.resolve("pkg", "Args")
    assert ref is not None and ref.kind == "class"
    fields = t.class_fields(ref)
    assert list(fields) == ["lora_rank", "old_name", "new_name", "limit", "computed", "targets", "legacy", "required"]
    assert fields["lora_rank"].declared_in == "Args" and fields["lora_rank"].default == "16"  # the subclass wins
    assert fields["old_name"].declared_in == "Mixin" and fields["old_name"].file == "pkg/base.py"
    assert fields["old_name"].deprecated and fields["old_name"].replacement == "new_name"
    assert fields["new_name"].type == "Optional[str]" and fields["new_name"].default == "null"
    assert fields["limit"].default == "1024" and not fields["limit"].default_is_expr  # a module constant, folded
    assert fields["computed"].default == "compute()" and fields["computed"].default_is_expr  # not a literal: as written
    assert fields["targets"].default == '["q", "v"]'
    assert (
        fields["legacy"].deprecated.startswith("`legacy` is deprecated") and fields["legacy"].replacement == "new_name"
    )
    assert fields["required"].required and fields["required"].default is None
    assert t.external_bases(ref) == ["transformers:TrainingArguments"]
    assert [r.name for r in t.mro(ref)] == ["Args", "Mixin"]  # the external base is named, not read
    # the mixin's doc is the first sentence of its help
    assert t.class_fields(t.resolve("pkg.base", "Mixin"))["lora_rank"].doc == "The rank."


def test_a_base_picked_at_run_time_names_every_alternative(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/args.py": """
                import os
                from dataclasses import dataclass
                from transformers import Seq2SeqTrainingArguments

                if os.environ.get("USE_MCA"):
                    from mcore_adapter import Seq2SeqTrainingArguments as Mca
                    Base = Mca
                else:
                    Base = Seq2SeqTrainingArguments

                @dataclass
                class TrainingArguments(Base):
                    ray_run_name: str = None
            """,
        },
    )
    ref = t.resolve("pkg.args", "TrainingArguments")
    assert t.external_bases(ref) == ["mcore_adapter:Seq2SeqTrainingArguments | transformers:Seq2SeqTrainingArguments"]


def test_pydantic_v1_model_alias_and_deprecation(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/compat.py": "from pydantic.v1 import *\n",
            "pkg/config.py": """
                from pkg.compat import BaseModel, Field

                class Offload(BaseModel):
                    pin_memory: bool = False
                    \"\"\"Pin the buffers.\"\"\"

                class Zero(BaseModel):
                    prefetch_bucket_size: int = Field(int(5e7), ge=0, alias="stage3_prefetch_bucket_size")
                    cpu_offload: bool = Field(False, deprecated=True, new_param="offload")
                    offload: Offload = None
            """,
        },
    )
    zero = t.resolve("pkg.config", "Zero")
    assert t.is_model(zero)  # BaseModel through a star import of pydantic.v1
    walked = {path: (it, sub) for path, it, sub in t.walk_model(zero, "zero")}
    assert sorted(walked) == [
        "zero.cpu_offload",
        "zero.offload",
        "zero.offload.pin_memory",
        "zero.stage3_prefetch_bucket_size",
    ]
    it, _ = walked["zero.stage3_prefetch_bucket_size"]
    assert it.name == "stage3_prefetch_bucket_size" and it.aliases == ["prefetch_bucket_size"]
    assert it.default == "50000000" and it.extra["constraints"] == {"ge": 0}
    assert walked["zero.cpu_offload"][0].deprecated and walked["zero.cpu_offload"][0].replacement == "offload"
    assert walked["zero.offload"][1] is not None  # a section: its type is a model of the package
    assert walked["zero.offload.pin_memory"][0].doc == "Pin the buffers."  # the attribute docstring


def test_pydantic_v2_model_validation_alias_annotated_and_validator(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/schema.py": """
                from typing import Annotated, Optional
                from pydantic import AliasChoices, BaseModel, Field, field_validator

                class Lora(BaseModel):
                    lora_r: Optional[int] = Field(default=None, validation_alias=AliasChoices("lora_r", "r"),
                                                  description="LoRA rank. More text.")
                    lora_alpha: Annotated[int, Field(ge=1, description="Alpha.")] = 16
                    old_flag: bool | None = None
                    eager: bool | None = Field(default=None, deprecated="Use `attn: eager` instead.")

                    @field_validator("old_flag")
                    @classmethod
                    def check(cls, v):
                        if v:
                            raise DeprecationWarning("`old_flag` is no longer supported")
                        return v

                class Config(Lora, BaseModel):
                    micro_batch_size: int | None = Field(default=1, json_schema_extra={"description": "Batch."})
            """,
        },
    )
    fields = t.class_fields(t.resolve("pkg.schema", "Config"))
    assert fields["lora_r"].aliases == ["r"] and fields["lora_r"].doc == "LoRA rank."  # its own name is no alias
    assert fields["lora_alpha"].default == "16" and fields["lora_alpha"].doc == "Alpha."
    assert fields["lora_alpha"].extra["constraints"] == {"ge": 1}
    assert fields["old_flag"].deprecated == "`old_flag` is no longer supported"  # its validator says so
    assert fields["eager"].deprecated == "Use `attn: eager` instead."
    assert fields["micro_batch_size"].doc == "Batch." and fields["micro_batch_size"].declared_in == "Config"


def test_argparse_flags_of_a_function(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/cli.py": """
                import argparse
                DEFAULT_PORT = 29500

                def parse_args():
                    parser = argparse.ArgumentParser(description="x")
                    group = parser.add_argument_group("g")
                    parser.add_argument("-H", "--hostfile", type=str, default="/job/hostfile", help="Hostfile path. More.")
                    group.add_argument("--master_port", type=int, default=DEFAULT_PORT)
                    parser.add_argument("--force", action="store_true", help="Deprecated: use --yes.")
                    parser.add_argument("--mode", choices=["a", "b"])
                    return parser.parse_args()

                def other():
                    p = argparse.ArgumentParser(add_help=False)
                    p.add_argument("--elsewhere")
            """,
        },
    )
    flags = {f.name: f for f in t.argparse_flags("pkg.cli", "parse_args")}
    assert sorted(flags) == ["--force", "--help", "--hostfile", "--master_port", "--mode"]
    assert flags["--hostfile"].aliases == ["-H"] and flags["--hostfile"].default == '"/job/hostfile"'
    assert flags["--hostfile"].doc == "Hostfile path." and flags["--hostfile"].type == "str"
    assert flags["--master_port"].default == "29500"
    assert flags["--force"].default == "false" and flags["--force"].deprecated  # argparse's store_true default
    assert flags["--mode"].extra["choices"] == ["a", "b"] and flags["--mode"].default == "null"
    assert flags["--help"].aliases == ["-h"] and flags["--help"].extra["argparse"]
    assert [f.name for f in t.argparse_flags("pkg.cli", "other")] == ["--elsewhere"]  # add_help=False: no --help


def test_dict_reads_follow_the_config_through_calls(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/constants.py": """
                TRAIN_BATCH = "train_batch_size"
                TRAIN_BATCH_DEFAULT = None
                FP16 = "fp16"
                LOSS_SCALE = "loss_scale"
                LOSS_SCALE_DEFAULT = 0
            """,
            "pkg/utils.py": """
                def get_scalar_param(param_dict, param_name, param_default_value):
                    return param_dict.get(param_name, param_default_value)
            """,
            "pkg/zero.py": """
                from pydantic import BaseModel

                class ZeroConfig(BaseModel):
                    stage: int = 0
            """,
            "pkg/config.py": """
                from .constants import *
                from .utils import get_scalar_param
                from .zero import ZeroConfig

                _REMOVED = {"nebula": "Nebula has been removed."}

                def get_loss_scale(param_dict):
                    if FP16 in param_dict.keys():
                        return get_scalar_param(param_dict[FP16], LOSS_SCALE, LOSS_SCALE_DEFAULT)

                class Config:
                    def __init__(self, config):
                        for key, message in _REMOVED.items():
                            if key in config:
                                raise ValueError(message)
                        self._param_dict = config
                        self._initialize(dict(self._param_dict))

                    def _initialize(self, param_dict):
                        self.batch = get_scalar_param(param_dict, TRAIN_BATCH, TRAIN_BATCH_DEFAULT)
                        self.loss_scale = get_loss_scale(param_dict)
                        self.zero = ZeroConfig(**param_dict.get("zero_optimization", {}))
                        self.unknown = param_dict.get("computed", compute())
            """,
        },
    )
    dr = DictReads(t)
    dr.run(t.resolve("pkg.config", "Config"), "config")
    assert sorted(".".join(p) for p in dr.reads) == [
        "computed",
        "fp16",
        "fp16.loss_scale",
        "nebula",
        "train_batch_size",
        "zero_optimization",
    ]
    batch = dr.reads[("train_batch_size",)]
    assert default_text(batch.default) == ("null", False)
    assert (batch.file, batch.line) == ("pkg/config.py", 21)  # where the key is passed, not the generic getter
    assert default_text(dr.reads[("fp16", "loss_scale")].default) == ("0", False)
    assert default_text(dr.reads[("computed",)].default) == ("compute()", True)  # not a literal: as written
    assert sorted(dr.models) == [("zero_optimization",)] and dr.models[("zero_optimization",)].ref.name == "ZeroConfig"
    assert dr.removed == {("nebula",): "Nebula has been removed."}


def test_pydantic_aliases_in_class_fields(tmp_path):
    # axolotl's RemappedParameters style: `alias=` is the key a user writes; `validation_alias` wins over it where
    # both are given; `serialization_alias` names a dump's key only; a v1 model's alias= is read the same way
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/schema.py": """
                from pydantic import AliasChoices, AliasPath, BaseModel, Field
                from pydantic.v1 import BaseModel as V1Model, Field as V1Field

                KEY = "kind_of_thing"

                class Remapped(BaseModel):
                    overrides_of_thing: dict | None = Field(default=None, alias="thing_config")
                    type_of_thing: str | None = Field(default=None, alias=KEY)
                    both: int = Field(1, alias="dumped_and_read", validation_alias=AliasChoices("both", "b", AliasPath("x")))
                    nested: int = Field(1, validation_alias=AliasPath("outer", "inner"))
                    dump_only: int = Field(1, serialization_alias="written_out")

                class Old(V1Model):
                    value: int = V1Field(0, alias="old_value")
            """,
        },
    )
    f = t.class_fields(t.resolve("pkg.schema", "Remapped"))
    assert (
        f["overrides_of_thing"].aliases == ["thing_config"] and f["overrides_of_thing"].extra["alias"] == "thing_config"
    )
    assert f["type_of_thing"].aliases == ["kind_of_thing"]  # a module constant, resolved
    assert f["both"].aliases == ["b", "x"]  # validation_alias wins; its own name is no alias; AliasPath of one key
    assert f["nested"].aliases == []  # a key inside another key: not a name
    assert f["dump_only"].aliases == []
    assert t.class_fields(t.resolve("pkg.schema", "Old"))["value"].aliases == ["old_value"]
    # walk_model names a field by its alias, as pydantic's field.alias (and the import build) does
    walked = {p: it for p, it, _ in t.walk_model(t.resolve("pkg.schema", "Remapped"), "")}
    assert walked["thing_config"].aliases == ["overrides_of_thing"] and walked["thing_config"].name == "thing_config"


def test_argparse_option_strings_a_parser_class_adds(tmp_path):
    # accelerate's CustomArgumentParser style: the parser's add_argument swaps in an action of the package whose
    # __init__ adds "--a-b" for "--a_b"; its groups swap argparse's store / store_true / store_const actions
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/utils.py": """
                import argparse

                class _Store(argparse.Action):
                    def __init__(self, *args, **kwargs):
                        super().__init__(*args, **kwargs)
                        new = []
                        for option_string in self.option_strings:
                            new.append(option_string)
                            if "_" in option_string[2:]:
                                new.append(option_string.replace("_", "-"))
                        self.option_strings = new

                class _StoreConst(_Store):
                    def __init__(self, option_strings, dest, const, default=None, required=False, help=None):
                        super().__init__(option_strings=option_strings, dest=dest, nargs=0, const=const)

                class _StoreTrue(_StoreConst):
                    def __init__(self, option_strings, dest, default=None, required=False, help=None):
                        super().__init__(option_strings=option_strings, dest=dest, const=True)

                class Group(argparse._ArgumentGroup):
                    def _add_action(self, action):
                        args = vars(action)
                        if isinstance(action, argparse._StoreTrueAction):
                            action = _StoreTrue(args["option_strings"], args["dest"])
                        elif isinstance(action, argparse._StoreConstAction):
                            action = _StoreConst(args["option_strings"], args["dest"], args["const"])
                        elif isinstance(action, argparse._StoreAction):
                            action = _Store(**args)
                        action = super()._add_action(action)
                        return action

                class Parser(argparse.ArgumentParser):
                    def add_argument(self, *args, **kwargs):
                        if "action" in kwargs:
                            if kwargs["action"] == "store_true":
                                kwargs["action"] = _StoreTrue
                        else:
                            kwargs["action"] = _Store
                        super().add_argument(*args, **kwargs)

                    def add_argument_group(self, *args, **kwargs):
                        group = Group(self, *args, **kwargs)
                        self._action_groups.append(group)
                        return group
            """,
            "pkg/cli.py": """
                import argparse
                from pkg.utils import Parser

                def make(subparsers=None):
                    if subparsers is not None:
                        parser = subparsers.add_parser("run", add_help=False)
                    else:
                        parser = Parser("run", add_help=False)
                    parser.add_argument("-h", "--help", action="help")
                    parser.add_argument("--config_file", default=None)
                    parser.add_argument("--quiet", "-q", action="store_true")
                    g = parser.add_argument_group("g")
                    g.add_argument("--num_procs", type=int)
                    g.add_argument("--no_cluster", action="store_false")
                    g.add_argument("--many_items", action="append")
                    return parser

                def plain():
                    p = argparse.ArgumentParser()
                    p.add_argument("--under_score")
            """,
        },
    )
    flags = {f.name: f for f in t.argparse_flags("pkg.cli", "make")}
    assert (
        flags["--config_file"].aliases == ["--config-file"]
        and flags["--config_file"].extra["spellings_from"] == "Parser"
    )
    assert flags["--quiet"].aliases == ["-q"]  # store_true -> _StoreTrue, but no "_" after the dashes
    assert flags["--help"].aliases == ["-h"]  # action="help" is kept: argparse's own
    assert flags["--num_procs"].aliases == ["--num-procs"]  # the group swaps argparse's store action
    assert flags["--no_cluster"].aliases == ["--no-cluster"]  # store_false is a _StoreConstAction
    assert flags["--many_items"].aliases == []  # append: not swapped
    assert [f.aliases for f in t.argparse_flags("pkg.cli", "plain") if f.name == "--under_score"] == [[]]


def test_replacement_in_states_a_name_not_a_value():
    from indexer.registry_static import replacement_in

    said = {
        "`a` is deprecated and will be removed in version 2. Use `b_c` instead.": "b_c",
        "Deprecated alias of `b_c`, will be removed in v6.": "b_c",
        "Deprecated, the use of `--b_c` is preferred.": "b_c",
        "a is deprecated, use b_c instead": "b_c",
        "Deprecated, use `b_c` (str) instead.": "b_c",
        "`a` argument is deprecated in favor of `b_c` and will be removed": "b_c",
        "Use `b_c: eager` instead.": None,  # a value to set
        "Use `--b_c value` instead": None,
        "use `b_c={'x': 1}` instead": None,
        "Use at your own risk, will be deprecated soon.": None,  # "at" names nothing
        "Use `b_c` to control one thing and `d` for another.": None,
        "This argument is deprecated.": None,
    }
    for text, want in said.items():
        assert replacement_in(text, "a") == want, text


def test_a_preposition_before_the_name_is_no_deprecation_of_it(tmp_path):
    t = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/args.py": """
                import warnings
                from dataclasses import dataclass

                @dataclass
                class Args:
                    knob: str = "no"
                    old_knob: str = None

                    def __post_init__(self):
                        warnings.warn("using `Enum` for `knob` is deprecated and will be removed in version 5")
                        warnings.warn("`old_knob` is deprecated. Use `knob` instead")
            """,
        },
    )
    fields = t.class_fields(t.resolve("pkg.args", "Args"))
    assert fields["knob"].deprecated is None
    assert fields["old_knob"].deprecated and fields["old_knob"].replacement == "knob"


def test_merge_records_a_replacement_only_where_it_is_a_name_of_the_class():
    def rec(name, deprecated=None, replacement=None):
        return {
            "kind": "field",
            "name": name,
            "path": f"C.{name}",
            "type": "int",
            "doc": None,
            "aliases": [],
            "default": "1",
            "default_is_expr": False,
            "deprecated": deprecated,
            "replacement": replacement,
            "file": "p.py",
            "line": 1,
            "owners": None,
            "inherits": None,
        }

    releases = ["1.0.0", "1.1.0", "1.2.0"]
    per = {
        # 1.0.0 says "use new" before `new` exists; 1.1.0 has it; 1.2.0 names a word that is no name ("the")
        "1.0.0": {"p:C.old": rec("old", "dep", "new"), "p:C.other": rec("other", "dep", "the")},
        "1.1.0": {"p:C.old": rec("old", "dep", "new"), "p:C.new": rec("new"), "p:C.other": rec("other", "dep", "the")},
        "1.2.0": {"p:C.new": rec("new"), "p:D.old2": rec("old2", "dep", "new")},
    }
    merged = rt.merge("p", releases, per)
    assert merged["p:C.old"]["replacement"] == {"1.1.0": "new"}
    assert "replacement" not in merged["p:C.other"]
    assert "replacement" not in merged["p:D.old2"]  # `new` is a name of class C, not of D
    # aliases that change between releases are kept per release (`aliases` is the newest's)
    per["1.2.0"]["p:C.new"]["aliases"] = ["nu"]
    merged = rt.merge("p", releases, per)
    e = merged["p:C.new"]
    assert e["aliases"] == ["nu"] and e["aliases_by_release"] == {"1.1.0": [], "1.2.0": ["nu"]}
    assert rt.aliases_at(e, "1.1.0", releases) == [] and rt.aliases_at(e, "1.2.0", releases) == ["nu"]
    tl = {"format": 1, "package": "p", "releases": releases, "names": merged}
    assert rt.merge("p", releases, rt.records_at(tl)) == merged  # read back per release, merged again: the same


def test_first_sentence():
    assert first_sentence("Use e.g. 8 here. Then more.") == "Use e.g. 8 here."
    assert first_sentence("  One line\n  continues here.\n\n Second paragraph.") == "One line continues here."
    assert first_sentence(None) is None


def test_merge_spans_defaults_and_deprecation_are_deterministic():
    def rec(default, deprecated=None):
        return {
            "kind": "field",
            "name": "x",
            "path": "C.x",
            "type": "int",
            "doc": None,
            "aliases": [],
            "default": default,
            "default_is_expr": False,
            "deprecated": deprecated,
            "replacement": None,
            "file": "p.py",
            "line": 1,
            "owners": None,
            "inherits": None,
        }

    releases = ["1.0.0", "1.1.0", "1.2.0", "1.3.0"]
    per = {
        "1.0.0": {"p:C.x": rec("1")},
        "1.1.0": {"p:C.x": rec("2", "x is deprecated.")},
        "1.2.0": {},
        "1.3.0": {"p:C.x": rec("2", "x is deprecated.")},
    }
    merged = rt.merge("p", releases, per)
    e = merged["p:C.x"]
    assert e["spans"] == [["1.0.0", "1.1.0"], ["1.3.0", "1.3.0"]]  # it came back
    assert e["defaults"] == {"1.0.0": "1", "1.1.0": "2"}
    assert e["deprecated"] == {"1.1.0": "x is deprecated."}
    tl = {"format": 1, "package": "p", "releases": releases, "names": merged}
    assert rt.dumps(tl) == rt.dumps(json.loads(rt.dumps(tl)))


def test_select_last_patch_of_each_minor_with_post_releases():
    versions = ["3.4.0", "3.4.1", "3.4.1.post1", "3.5.0rc1", "3.5.0", "2.9.9", "4.7.0"]
    assert rt.select("ms-swift", versions) == ["3.4.1.post1", "3.5.0"]
    assert rt.select("llamafactory", ["0.8.2", "0.8.3", "0.9.0", "0.9.1"]) == ["0.8.3", "0.9.0", "0.9.1"]


# ---------------------------------------------------------------- the committed timelines


def _load_strict(path: Path) -> dict:
    def no_dupes(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), (
            f"{path.name}: duplicate keys {sorted(k for k in keys if keys.count(k) > 1)[:5]}"
        )
        return dict(pairs)

    return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=no_dupes)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_timeline_shape(pkg):
    path = TIMELINE / f"{pkg}.json"
    tl = _load_strict(path)
    assert set(tl) - {"added"} == {"format", "package", "window", "releases", "read", "requires", "skipped", "names"}
    # "added" (kb registry add): exactly the releases the window's rule would not choose among them
    assert tl.get("added", []) == sorted(set(tl["releases"]) - set(rt.select(pkg, tl["releases"])), key=Version)
    assert tl["format"] == 1 and tl["package"] == pkg and tl["window"] == rt.WINDOWS[pkg]["why"]
    rels = tl["releases"]
    assert rels == sorted(rels, key=Version) and len(rels) == len(set(rels)) and len(rels) >= 6
    assert set(tl["read"]) == set(rels) and set(tl["requires"]) == set(rels) and set(tl["skipped"]) <= set(rels)
    for v, r in tl["read"].items():
        assert r["how"] == "static" and len(r["sha256"]) == 64 and v in r["file"].replace("_", "-") or v in r["file"]
    order = {r: i for i, r in enumerate(rels)}
    for rid, e in tl["names"].items():
        assert rid.startswith(pkg + ":") and e["kind"] in KINDS, rid
        assert e["path"] and e["name"], rid
        spans = e["spans"]
        assert spans, rid
        prev = -2
        for a, b in spans:
            assert order[a] <= order[b] and order[a] > prev + 1, (rid, spans)  # ordered, disjoint, not adjacent
            prev = order[b]
        assert e["source_release"] == spans[-1][1], rid
        for key in ("defaults", "deprecated", "removed"):
            for r in e.get(key, {}):
                assert rt.present_at(e, r, rels), (rid, key, r)
        assert list(e["defaults"]) and min(e["defaults"], key=Version) == spans[0][0], rid
        assert ":" in e["source"] and e["source"].rsplit(":", 1)[1].isdigit(), rid
    assert path.read_text(encoding="utf-8") == rt.dumps(tl)  # the writer's own form: sorted, one name a line


def test_timeline_files_are_compact():
    total = sum(p.stat().st_size for p in TIMELINE.glob("*.json"))
    assert total < 4_000_000, total


@pytest.mark.parametrize("pkg", ["deepspeed", "transformers", "accelerate", "peft"])
def test_sampled_releases_agree_with_the_import_built_registry(pkg):
    result = rt.check(pkg)
    sampled = [r for r in result if r != "out_of_scope"]
    assert sampled and all(not result[r].get("not_in_timeline") for r in sampled)  # the timeline reads them all
    for release, groups in rt.explained_check(pkg, result).items():
        assert "unexplained" not in groups, (release, groups.get("unexplained"))
        # the static read misses nothing the import build records
        assert not result[release]["missing"], (release, result[release]["missing"])
    if pkg != "deepspeed":
        assert all(not result[r]["added"] and not result[r]["kind"] for r in sampled)


# ---------------------------------------------------------------- determinism


def _offline_ready(pkg: str) -> bool:
    tl = rt.load(pkg)
    return all(rt.cached_file(pkg, v) is not None for v in tl["releases"])


def test_rebuild_from_cache_is_byte_identical():
    pkg = "peft"
    if not _offline_ready(pkg):
        pytest.skip(
            "the peft releases are not in .cache/kb/dist (run python -m indexer.registry_timeline --package peft)"
        )
    tl = rt.build(pkg, offline=True, progress=lambda s: None)
    assert rt.dumps(tl) == (TIMELINE / f"{pkg}.json").read_text(encoding="utf-8")


@pytest.mark.slow
def test_rebuild_with_downloads_is_byte_identical():
    tl = rt.build("peft", offline=False, progress=lambda s: None)  # pip download (network) where not cached
    assert rt.dumps(tl) == (TIMELINE / "peft.json").read_text(encoding="utf-8")


# ---------------------------------------------------------------- facts, each checked in the release source


def _entry(pkg: str, rid: str) -> tuple[dict, list[str]]:
    tl = rt.load(pkg)
    return tl["names"][f"{pkg}:{rid}"], tl["releases"]


def test_fact_transformers_warmup_ratio_last_in_5_14():
    # transformers-5.14.1/transformers/training_args.py:1443 `warmup_ratio: float | None = field(`; no such field in
    # 5.15.1's training_args.py; 4.57.6's is at :939 with `default=0.0`
    e, rels = _entry("transformers", "TrainingArguments.warmup_ratio")
    assert e["spans"] == [[rels[0], "5.14.1"]] and rels[rels.index("5.14.1") + 1] == "5.15.1"
    assert e["defaults"] == {"4.46.3": "0.0", "5.0.0": "null"}
    # its 5.x help: "This argument is deprecated and will be removed in v5.2."
    assert list(e["deprecated"]) == ["5.0.0"]


def test_fact_transformers_evaluation_strategy_gone_after_4_50():
    # transformers-4.50.3/transformers/training_args.py:1430 `evaluation_strategy: ...`; none in 4.51.3
    # :1569 "`evaluation_strategy` is deprecated and will be removed in version 4.46 of 🤗 Transformers. Use
    # `eval_strategy` instead": the rename the source states, from the first release of the window
    e, _ = _entry("transformers", "TrainingArguments.evaluation_strategy")
    assert e["spans"] == [["4.46.3", "4.50.3"]] and e["replacement"] == {"4.46.3": "eval_strategy"}
    # :1576 "using `EvaluationStrategy` for `eval_strategy` is deprecated": a way of setting it, not the name
    assert _entry("transformers", "TrainingArguments.eval_strategy")[0]["deprecated"] == {}


def test_fact_trl_grpo_epsilon_high_since_0_16():
    # trl-0.16.1/trl/trainer/grpo_config.py:275 `epsilon_high: Optional[float] = field(`; none in 0.15.2's
    e, _ = _entry("trl", "GRPOConfig.epsilon_high")
    assert e["spans"][0][0] == "0.16.1"
    # trl-0.14.0/trl/trainer/grpo_config.py:108 `num_generations`; trl 0.13.0 has no grpo_config.py
    g, _ = _entry("trl", "GRPOConfig.num_generations")
    assert g["spans"][0][0] == "0.14.0" and g["defaults"]["0.14.0"] == "8"
    assert "transformers:TrainingArguments" in (rt.load("trl")["names"]["trl:SFTConfig"]["inherits"] or "")


def test_fact_deepspeed_pin_memory_default_turns_true():
    # deepspeed-0.19.4/deepspeed/runtime/zero/offload_config.py:45 `pin_memory: bool = False`, 0.19.8's :45 `= True`
    e, _ = _entry("deepspeed", "zero_optimization.offload_param.pin_memory")
    assert e["defaults"] == {"0.14.4": "false", "0.19.8": "true"}


def test_fact_deepspeed_steps_per_print_default_and_removed_keys():
    # deepspeed-0.14.5/deepspeed/runtime/constants.py:80 `STEPS_PER_PRINT_DEFAULT = 10`; 0.15.4's :80 `= None`
    e, _ = _entry("deepspeed", "steps_per_print")
    assert e["defaults"] == {"0.14.4": "10", "0.15.4": "null"}
    # deepspeed-0.19.8/deepspeed/runtime/config.py:82 "nebula": "Nebula checkpointing has been removed. ..." (raised
    # by the loop over _REMOVED_TOP_LEVEL_CONFIG_KEYS); 0.19.4 still reads nebula.enabled
    n, _ = _entry("deepspeed", "nebula")
    assert n["removed"] == {"0.19.8": "Nebula checkpointing has been removed."}
    assert _entry("deepspeed", "nebula.enabled")[0]["spans"][-1][1] == "0.19.4"


def test_fact_accelerate_fsdp_version_since_1_6():
    # accelerate-1.6.0/accelerate/commands/launch.py:523 "--fsdp_version"; none in 1.5.2's launch.py
    e, _ = _entry("accelerate", "cli/accelerate launch/--fsdp_version")
    assert e["spans"][0][0] == "1.6.0"


def test_fact_peft_lora_bias_since_0_14():
    # peft-0.14.0/peft/tuners/lora/config.py:398 `lora_bias: bool = field(`; none in 0.13.2's
    e, _ = _entry("peft", "LoraConfig.lora_bias")
    assert e["spans"][0][0] == "0.14.0"


def test_fact_ms_swift_train_arguments_become_sft_arguments_and_train_type_deprecated():
    # ms-swift-3.12.6/swift/llm/argument/train_args.py:184 `class TrainArguments(...)`;
    # ms-swift-4.0.4/swift/arguments/sft_args.py:123 `class SftArguments(...)` (no TrainArguments in 4.x)
    tl = rt.load("ms-swift")
    assert tl["names"]["ms-swift:TrainArguments"]["spans"] == [["3.0.3", "3.12.6"]]
    assert tl["names"]["ms-swift:SftArguments"]["spans"][0][0] == "4.0.4"
    # ms-swift-3.12.6/.../base_args/base_args.py:98 `train_type: str = field(default='lora', ...)`;
    # ms-swift-4.0.4/swift/arguments/base_args/base_args.py:73 `train_type: Optional[str] = None` and :152
    # "`train_type` is deprecated, please use `tuner_type` instead."
    e = tl["names"]["ms-swift:BaseArguments.train_type"]
    assert e["defaults"] == {"3.0.3": '"lora"', "4.0.4": "null"}
    assert list(e["deprecated"]) == ["4.0.4"] and e["replacement"] == {"4.0.4": "tuner_type"}
    assert "TrainArguments" in e["owners"] and "SftArguments" in e["owners"]


def test_fact_llamafactory_pins_and_mixin_fields():
    # llamafactory-0.9.5 METADATA: "Requires-Dist: transformers!=4.52.0,!=4.57.0,<=5.6.0,>=4.55.0";
    # llamafactory-0.9.0 METADATA: "Requires-Dist: transformers <=4.45.0,>=4.41.2"
    tl = rt.load("llamafactory")
    assert tl["requires"]["0.9.5"]["transformers"] == "!=4.52.0,!=4.57.0,<=5.6.0,>=4.55.0"
    assert tl["requires"]["0.9.0"]["transformers"] == "<=4.45.0,>=4.41.2"
    # llamafactory-0.9.5/llamafactory/hparams/finetuning_args.py:81 `lora_target` in LoraArguments, a mixin of
    # FinetuningArguments: named by the arguments class a user fills
    e = tl["names"]["llamafactory:FinetuningArguments.lora_target"]
    assert e["source"] == "llamafactory/hparams/finetuning_args.py:81" and e["owners"] == ["FinetuningArguments"]


def test_fact_axolotl_schema_moved_and_fields_kept():
    # axolotl-0.6.0/axolotl/utils/config/models/input/v0_4_1/__init__.py:581 `class AxolotlInputConfig(`, :413
    # `micro_batch_size`; axolotl-0.19.0/axolotl/utils/schemas/config.py:191, schemas/training.py:77
    tl = rt.load("axolotl")
    assert tl["names"]["axolotl:AxolotlInputConfig"]["source"] == "axolotl/utils/schemas/config.py:191"
    e = tl["names"]["axolotl:AxolotlInputConfig.micro_batch_size"]
    assert e["spans"] == [["0.6.0", "0.19.0"]] and e["source"] == "axolotl/utils/schemas/training.py:77"


# ---------------------------------------------------------------- kb registry add (a fake release, no network)

ENTRY = Path(__file__).resolve().parent.parent / "data" / "entries" / "lora-ddp-unused-parameters.yaml"


def _entry_lora_fields() -> list[str]:
    """Two LoraConfig fields the entry names (read from the entry, so the fake releases have them)."""
    from kb.content.entries import load_entry

    e = load_entry(ENTRY).entry
    ids = [*e.params, *(p for f in e.fixes for p in f.params)]
    names = [i.split(".", 1)[1] for i in dict.fromkeys(ids) if i.startswith("peft:LoraConfig.")]
    assert len(names) >= 2, names
    return names[:2]


def _lora_release(root: Path, version: str, fields: dict[str, str], post_init: str = "") -> Path:
    """An unpacked peft release: peft/tuners/lora/config.py with a LoraConfig dataclass of ``fields``
    (name -> default source) and METADATA, laid out as registry_timeline.unpack lays one out."""
    folder = root / f"peft-{version}"
    body = "".join(f"    {n}: object = {d}\n" for n, d in fields.items())
    if post_init:
        body += "\n    def __post_init__(self):\n" + textwrap.indent(textwrap.dedent(post_init), " " * 8)
    files = {
        "peft/__init__.py": "from .tuners.lora.config import LoraConfig\n",
        "peft/tuners/__init__.py": "",
        "peft/tuners/lora/__init__.py": "",
        "peft/tuners/lora/config.py": "import warnings\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass LoraConfig:\n"
        + body,
        "META/METADATA": f"Metadata-Version: 2.1\nName: peft\nVersion: {version}\nRequires-Dist: transformers\n",
    }
    for rel, text in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return folder


def _fake_releases(root: Path) -> dict[str, Path]:
    a, b = _entry_lora_fields()
    return {
        "0.13.0": _lora_release(root, "0.13.0", {a: "8", b: "None", "old_knob": "1", "gone_knob": "0"}),
        "0.14.0": _lora_release(
            root,
            "0.14.0",
            {a: "16", b: "None", "old_knob": "None", "new_knob": "1"},
            'if self.old_knob is not None:\n    warnings.warn("`old_knob` is deprecated, use `new_knob` instead.")\n',
        ),
        "0.15.0": _lora_release(root, "0.15.0", {a: "16", "new_knob": "1"}),
    }


def _fake_timeline(out_dir: Path, folders: dict[str, Path]) -> dict:
    """The timeline build() would write for these releases (read from the folders)."""
    releases = sorted(folders, key=Version)
    per = {v: rt.read_release("peft", v, folders[v]).names for v in releases}
    tl = {
        "format": rt.FORMAT,
        "package": "peft",
        "window": rt.WINDOWS["peft"]["why"],
        "releases": releases,
        "read": {
            v: {"file": folders[v].name, "sha256": "0" * 64, "how": "static", "metadata": "METADATA"} for v in releases
        },
        "requires": {v: rt.requirements(folders[v])[0] for v in releases},
        "skipped": {},
        "names": rt.merge("peft", releases, per),
    }
    rt.write("peft", tl, out_dir)
    return tl


def test_add_release_inserts_in_order_diffs_and_equals_a_full_merge(tmp_path):
    folders = _fake_releases(tmp_path / "src")
    out = tmp_path / "timeline"
    _fake_timeline(out, {v: folders[v] for v in ("0.13.0", "0.15.0")})
    before = (out / "peft.json").read_text(encoding="utf-8")
    a, b = _entry_lora_fields()

    dry = rt.add_release("peft", "0.14.0", write=False, folder=folders["0.14.0"], out_dir=out, progress=lambda s: None)
    assert dry["status"] == "dry-run" and dry["written"] is None
    assert (out / "peft.json").read_text(encoding="utf-8") == before  # nothing written
    res = rt.add_release("peft", "0.14.0", folder=folders["0.14.0"], out_dir=out, progress=lambda s: None)
    assert res["status"] == "added" and res["previous"] == "0.13.0" and res["next"] == "0.15.0"
    tl = res["timeline"]
    assert tl["releases"] == ["0.13.0", "0.14.0", "0.15.0"] and "added" not in tl
    text = (out / "peft.json").read_text(encoding="utf-8")
    assert text == rt.dumps(tl) and text == rt.dumps(json.loads(text))  # deterministic, the writer's own form
    # the same names as a full merge of the three releases read from scratch
    full = rt.merge("peft", tl["releases"], {v: rt.read_release("peft", v, folders[v]).names for v in tl["releases"]})
    assert tl["names"] == full

    d = res["diff"]
    assert (d["from"], d["to"]) == ("0.13.0", "0.14.0")
    assert d["added"] == ["peft:LoraConfig.new_knob"] and d["removed"] == ["peft:LoraConfig.gone_knob"]
    assert d["renamed"] == [
        {"from": "peft:LoraConfig.old_knob", "to": "peft:LoraConfig.new_knob", "stated_in": "0.14.0", "old_kept": True}
    ]
    assert {"id": f"peft:LoraConfig.{a}", "from": "8", "to": "16"} in d["defaults"]
    assert [x["id"] for x in d["deprecated"]] == ["peft:LoraConfig.old_knob"]
    n = res["next_diff"]  # 0.15.0's changes now count from 0.14.0: the rename completed, b gone
    assert n["removed"] == [f"peft:LoraConfig.{b}", "peft:LoraConfig.old_knob"]
    assert n["renamed"] == [
        {"from": "peft:LoraConfig.old_knob", "to": "peft:LoraConfig.new_knob", "stated_in": "0.14.0", "old_kept": False}
    ]
    assert tl["names"]["peft:LoraConfig.old_knob"]["replacement"] == {"0.14.0": "new_knob"}

    # the entries that name a changed parameter: a's default at 0.14.0, b's removal at 0.15.0
    entries = tmp_path / "entries"
    entries.mkdir()
    (entries / ENTRY.name).write_text(ENTRY.read_text(encoding="utf-8"), encoding="utf-8")
    touched = rt.touched_entries(res, entries)
    got = {(t["param"], t["release"], t["change"].split(" ")[0]) for t in touched}
    assert got == {(f"peft:LoraConfig.{a}", "0.14.0", "default"), (f"peft:LoraConfig.{b}", "0.15.0", "removed")}
    report = rt.add_report(res, touched)
    assert "renamed (1):" in report and "entries to re-read (2):" in report and ENTRY.stem in report

    again = rt.add_release("peft", "0.14.0", folder=folders["0.14.0"], out_dir=out, progress=lambda s: None)
    assert again["status"] == "present" and again["diff"] == d
    assert (out / "peft.json").read_text(encoding="utf-8") == text


def test_add_release_outside_the_rule_is_kept_as_added(tmp_path):
    folders = _fake_releases(tmp_path / "src")
    out = tmp_path / "timeline"
    _fake_timeline(out, {v: folders[v] for v in ("0.14.0", "0.15.0")})
    older = _lora_release(tmp_path / "src", "0.14.1", {"new_knob": "1"})  # the rule now picks 0.14.1 for 0.14
    res = rt.add_release("peft", "0.14.1", folder=older, out_dir=out, progress=lambda s: None)
    assert res["timeline"]["releases"] == ["0.14.0", "0.14.1", "0.15.0"]
    assert res["timeline"]["added"] == ["0.14.0"]  # a rebuild keeps it (build() reads "added")
    first = rt.add_release("peft", "0.13.0", folder=folders["0.13.0"], out_dir=out, progress=lambda s: None)
    assert first["previous"] is None and first["diff"] is None and first["next_diff"]["from"] == "0.13.0"


def test_add_release_errors_write_nothing(tmp_path, monkeypatch):
    folders = _fake_releases(tmp_path / "src")
    out = tmp_path / "timeline"
    _fake_timeline(out, {v: folders[v] for v in ("0.13.0", "0.15.0")})
    before = (out / "peft.json").read_text(encoding="utf-8")
    monkeypatch.setattr(rt, "DIST", tmp_path / "dist")
    monkeypatch.setattr(rt, "UNPACKED", tmp_path / "dist" / "unpacked")

    def no_such(pkg, version):
        raise RuntimeError(f"pip download {pkg}=={version} failed: ERROR: No matching distribution found")

    monkeypatch.setattr(rt, "download", no_such)
    for pkg, version, words in [
        ("nosuchpkg", "1.0", "no timeline for this package"),
        ("peft", "not-a-version", "not a version"),
        ("peft", "0.16.0", "no such release"),
    ]:
        with pytest.raises(rt.AddError, match=words):
            rt.add_release(pkg, version, out_dir=out, progress=lambda s: None)
    with pytest.raises(rt.AddError, match="not in"):
        rt.add_release("peft", "0.16.0", out_dir=out, offline=True, progress=lambda s: None)
    empty = tmp_path / "src" / "peft-0.16.0"
    (empty / "peft").mkdir(parents=True)
    (empty / "peft" / "__init__.py").write_text("", encoding="utf-8")
    with pytest.raises(rt.AddError, match="nothing could be read"):
        rt.add_release("peft", "0.16.0", folder=empty, out_dir=out, progress=lambda s: None)
    assert (out / "peft.json").read_text(encoding="utf-8") == before


def _wheel(folder: Path, dest: Path, version: str) -> Path:
    """A wheel of an unpacked fake release, as pip download would leave it in the cache."""
    import zipfile

    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"peft-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p in sorted(folder.rglob("*.py")):
            z.write(p, p.relative_to(folder).as_posix())
        z.writestr(f"peft-{version}.dist-info/METADATA", (folder / "META" / "METADATA").read_text(encoding="utf-8"))
    return path


def test_cli_registry_add(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cli.main import main

    folders = _fake_releases(tmp_path / "src")
    data = tmp_path / "data"
    out = data / "registry" / "timeline"
    _fake_timeline(out, {v: folders[v] for v in ("0.13.0", "0.15.0")})
    (data / "entries").mkdir(parents=True)
    (data / "entries" / ENTRY.name).write_text(ENTRY.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("KB_DATA", str(data))
    monkeypatch.setattr(rt, "DIST", tmp_path / "dist")
    monkeypatch.setattr(rt, "UNPACKED", tmp_path / "dist" / "unpacked")
    _wheel(folders["0.14.0"], tmp_path / "dist" / "peft", "0.14.0")
    before = (out / "peft.json").read_text(encoding="utf-8")
    run = CliRunner().invoke

    r = run(main, ["registry", "add", "peft==0.14.0", "--dry-run", "--offline"])
    assert r.exit_code == 0, r.output
    assert "dry run: nothing written" in r.output and "peft 0.13.0 -> 0.14.0:" in r.output and ENTRY.stem in r.output
    assert (out / "peft.json").read_text(encoding="utf-8") == before
    r = run(main, ["registry", "add", "peft==0.14.0", "--offline", "--json"])
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["status"] == "added" and j["diff"]["renamed"][0]["to"] == "peft:LoraConfig.new_knob" and j["touched"]
    assert "timeline" not in j and json.loads((out / "peft.json").read_text())["releases"] == [
        "0.13.0",
        "0.14.0",
        "0.15.0",
    ]
    after = (out / "peft.json").read_text(encoding="utf-8")
    r = run(main, ["registry", "add", "peft==0.14.0"])
    assert r.exit_code == 0 and "already in the timeline" in r.output and "peft 0.13.0 -> 0.14.0:" in r.output

    def no_such(pkg, version):
        raise RuntimeError(f"pip download {pkg}=={version} failed: ERROR: No matching distribution found")

    monkeypatch.setattr(rt, "download", no_such)
    for args, words in [
        (["peft==9.9.9"], "no such release"),
        (["peft==0.16.0", "--offline"], "not in"),
        (["nosuchpkg==1.0"], "no timeline for this package"),
        (["peft"], "PACKAGE==VERSION"),
        (["peft==x.y"], "not a version"),
    ]:
        r = run(main, ["registry", "add", *args])
        assert r.exit_code == 2 and words in r.output, (args, r.output)
    r = run(main, ["registry", "add", "peft==9.9.9", "--json"])
    assert r.exit_code == 2 and "no such release" in json.loads(r.stdout)["error"]
    assert (out / "peft.json").read_text(encoding="utf-8") == after  # no error wrote anything


@pytest.mark.parametrize("pkg", PACKAGES)
def test_the_committed_names_read_back_per_release_merge_to_themselves(pkg):
    # kb registry add merges a new release with the committed ones read back per release (records_at): that must
    # give exactly the committed names, so an added release changes only what it brings
    tl = rt.load(pkg)
    assert rt.merge(pkg, tl["releases"], rt.records_at(tl)) == tl["names"]


def test_fact_axolotl_aliases_model_type_and_model_config():
    # axolotl-0.19.0/axolotl/utils/schemas/deprecated.py:147-149 `overrides_of_model_config: ... = Field(...,
    # alias="model_config"`, :161-163 `type_of_model: ... alias="model_type"`; axolotl-0.6.0/axolotl/utils/config/
    # models/input/v0_4_1/__init__.py:116, :118 the same
    tl = rt.load("axolotl")
    e = tl["names"]["axolotl:AxolotlInputConfig.type_of_model"]
    assert e["aliases"] == ["model_type"] and e["spans"] == [["0.6.0", "0.19.0"]]
    assert tl["names"]["axolotl:AxolotlInputConfig.overrides_of_model_config"]["aliases"] == ["model_config"]


def test_fact_accelerate_launch_flags_have_their_hyphen_spellings():
    # accelerate-1.15.0/accelerate/commands/utils.py:23-31 `_StoreAction.__init__` adds
    # `option_string.replace("_", "-")` for every option string with "_" after its dashes; launch.py:198
    # "--num_processes" goes through CustomArgumentParser's add_argument group (CustomArgumentGroup._add_action)
    e, _ = _entry("accelerate", "cli/accelerate launch/--num_processes")
    assert e["aliases"] == ["--num-processes"]
    assert _entry("accelerate", "cli/accelerate launch/--quiet")[0]["aliases"] == ["-q"]  # no "_": no second spelling


def test_fact_renames_the_sources_state():
    # trl-0.16.1/trl/trainer/sft_config.py:195 "`max_seq_length` is deprecated and will be remove in version 0.20.0.
    # Use `max_length` instead."
    assert _entry("trl", "SFTConfig.max_seq_length")[0]["replacement"] == {"0.16.1": "max_length"}
    # transformers-5.23.0/transformers/training_args.py:936 "Deprecated alias of `activation_checkpointing_kwargs`,
    # will be removed in v6." (a help text); 5.22.2's :906 has no such help
    e, _ = _entry("transformers", "TrainingArguments.gradient_checkpointing_kwargs")
    assert e["replacement"] == {"5.23.0": "activation_checkpointing_kwargs"}
    # deepspeed-0.14.4/deepspeed/runtime/zero/config.py:187-190 `cpu_offload: bool = Field(None, deprecated=True,
    # new_param="offload_optimizer"`
    assert _entry("deepspeed", "zero_optimization.cpu_offload")[0]["replacement"] == {"0.14.4": "offload_optimizer"}
    # trl-0.28.0/trl/trainer/dpo_config.py:639 "... Please use a callback instead": no name of DPOConfig
    assert "replacement" not in _entry("trl", "DPOConfig.generate_during_eval")[0]
