"""Make a corpus of healthy training logs (fixtures, not tests): what real runs with nothing wrong print, on CPU.

    python bench/make_healthy_logs.py [--out tests/fixtures/healthy_logs] [--only NAME ...] [--list]

Each log is one small real job run in a subprocess on this machine (CPU only, gloo, no downloads: every model is
built from a config with random weights), its stdout and stderr captured together into ``NAME.log``, as
``cmd > NAME.log 2>&1`` would: DeepSpeed's launcher and ``deepspeed.initialize`` (ZeRO 0-3, the engine's config dump
at INFO, ``steps_per_print`` progress and timer lines), ``torchrun`` and ``accelerate launch`` banners, HF Trainer runs
of a tiny GPT-2 (tqdm bars, per-step loss dicts, the train summary; with and without DeepSpeed), a PEFT LoRA run, and
the warnings healthy runs print. A case whose job exits non-zero, or whose log is shorter than ``--min-lines``, stops
the script: the corpus only holds runs that went through.

Nothing is edited out of the output but the paths of this machine: the venv (``/opt/venv``), the job's temporary
folder (``/job``) and the home folder (``/home/user``). Timestamps, pids and timings are as the run printed them.
The README next to the logs is written too: each case's command and the package versions that made it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "healthy_logs"
PACKAGES = ("torch", "deepspeed", "transformers", "accelerate", "peft", "tqdm", "numpy")

# --- the jobs' scripts (written into the job's folder) -------------------------------------------------------------

DS_TRAIN = """
import argparse, torch, deepspeed

p = argparse.ArgumentParser()
p.add_argument("--local_rank", type=int, default=-1)
p.add_argument("--steps", type=int, default=12)
deepspeed.add_config_arguments(p)
args = p.parse_args()

torch.manual_seed(0)
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                            torch.nn.Linear(64, 1))
engine, optimizer, _, scheduler = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
g = torch.Generator().manual_seed(1 + engine.global_rank)
dtype = next(engine.module.parameters()).dtype
for step in range(args.steps):
    x = torch.randn(engine.train_micro_batch_size_per_gpu(), 32, generator=g)
    y = x.sum(1, keepdim=True)
    loss = torch.nn.functional.mse_loss(engine(x.to(dtype)).float(), y)
    engine.backward(loss)
    engine.step()
    if engine.is_gradient_accumulation_boundary() and engine.global_rank == 0:
        print(f"step {engine.global_steps} loss {loss.item():.4f}", flush=True)
if engine.global_rank == 0:
    print(f"finished {engine.global_steps} steps, ZeRO stage {engine.zero_optimization_stage()}", flush=True)
"""

ALLREDUCE = """
import os, time, torch, torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
print(f"[rank {rank}] init_process_group(gloo) ok, world_size={world}, local_rank={os.environ['LOCAL_RANK']}, "
      f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
for i, n in enumerate([1, 1024, 1 << 16, 1 << 20] * 3):
    t = torch.full((n,), float(rank + 1))
    t0 = time.perf_counter()
    dist.all_reduce(t)
    ms = (time.perf_counter() - t0) * 1e3
    expect = world * (world + 1) / 2
    print(f"[rank {rank}] all_reduce {i} numel={n}: sum={t[0].item():.1f} (expected {expect:.1f}) {ms:.2f} ms",
          flush=True)
    dist.barrier()
b = torch.arange(4.0) if rank == 0 else torch.zeros(4)
dist.broadcast(b, src=0)
print(f"[rank {rank}] broadcast from rank 0: {b.tolist()}", flush=True)
gathered = [torch.zeros(2) for _ in range(world)]
dist.all_gather(gathered, torch.tensor([rank, rank * 10.0]))
print(f"[rank {rank}] all_gather: {[g.tolist() for g in gathered]}", flush=True)
dist.destroy_process_group()
print(f"[rank {rank}] done", flush=True)
"""

ACCEL_TRAIN = """
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

set_seed(0)
acc = Accelerator(cpu=True, gradient_accumulation_steps=2)
acc.print(f"state: {acc.state}")
x = torch.randn(256, 16)
ds = TensorDataset(x, x @ torch.linspace(-1, 1, 16).unsqueeze(1))
dl = DataLoader(ds, batch_size=8, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.9)
model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
for epoch in range(3):
    bar = tqdm(dl, desc=f"epoch {epoch}", disable=not acc.is_local_main_process, mininterval=0)
    for i, (xb, yb) in enumerate(bar):
        with acc.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            acc.backward(loss)
            opt.step()
            sched.step()
            opt.zero_grad()
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if i % 4 == 3:
            acc.print(f"epoch {epoch} step {i + 1}: loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.5f}")
    acc.print(f"epoch {epoch}: last loss {acc.gather(loss.detach()).mean().item():.4f}")
acc.wait_for_everyone()
acc.print("training finished")
"""

HF_TRAIN = """
import argparse, torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

p = argparse.ArgumentParser()
p.add_argument("--local_rank", type=int, default=-1)
p.add_argument("--out", required=True)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--deepspeed", default=None)
p.add_argument("--lora", action="store_true")
p.add_argument("--grad-ckpt", action="store_true")
p.add_argument("--eval", action="store_true")
p.add_argument("--save", action="store_true")
p.add_argument("--accum", type=int, default=1)
args = p.parse_args()

set_seed(0)
VOCAB, SEQ, BATCH = 500, 32, 4


class Tokens(Dataset):
    def __init__(self, n, offset=0):
        self.n, self.offset = n, offset

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.offset + i)
        x = torch.randint(0, VOCAB, (SEQ,), generator=g)
        return {"input_ids": x, "labels": x}


model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4))
if args.lora:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["c_attn"],
                                             fan_in_fan_out=True, task_type="CAUSAL_LM"))
    model.print_trainable_parameters()
targs = TrainingArguments(
    output_dir=args.out, per_device_train_batch_size=BATCH, per_device_eval_batch_size=BATCH,
    gradient_accumulation_steps=args.accum, max_steps=args.steps, learning_rate=5e-4, warmup_steps=3,
    lr_scheduler_type="cosine", logging_steps=1, report_to=[], seed=0, dataloader_num_workers=0,
    eval_strategy="steps" if args.eval else "no", eval_steps=10,
    save_strategy="steps" if args.save else "no", save_steps=15, save_total_limit=1,
    gradient_checkpointing=args.grad_ckpt, deepspeed=args.deepspeed, use_cpu=args.deepspeed is None,
)
trainer = Trainer(model=model, args=targs, train_dataset=Tokens(BATCH * 4 * args.steps),
                  eval_dataset=Tokens(16, offset=100_000) if args.eval else None)
result = trainer.train()
print(result)
if args.eval:
    print(trainer.evaluate())
"""

PLAIN_WARNINGS = """
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(64, 8)
ds = TensorDataset(x, x.sum(1, keepdim=True))
# more workers than this machine's cores: the DataLoader warns and goes on
dl = DataLoader(ds, batch_size=8, num_workers=4)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=10)
sched.step()  # stepped before the optimizer: the scheduler warns once, training is unaffected
for epoch in range(30):
    for xb, yb in dl:
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):  # the old spelling: a FutureWarning
            out = model(xb)
        loss = torch.nn.functional.mse_loss(out.float(), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    sched.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.4f}", flush=True)
torch.save(model.state_dict(), "model.pt")
print("saved model.pt", sorted(torch.load("model.pt")), flush=True)
"""

SCRIPTS = {
    "ds_train.py": DS_TRAIN,
    "allreduce.py": ALLREDUCE,
    "accel_train.py": ACCEL_TRAIN,
    "hf_train.py": HF_TRAIN,
    "plain_warnings.py": PLAIN_WARNINGS,
}


def _ds(stage: int, **extra) -> dict:
    cfg = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 2,
        "gradient_clipping": 1.0,
        "log_level": "info",  # the engine's config dump and progress lines are INFO
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01, "torch_adam": True}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 4}},
        "zero_optimization": {"stage": stage},
    }
    cfg.update(extra)
    return cfg


HF_DS = {  # the HF Trainer's usual ds_config: "auto" filled from TrainingArguments
    "train_micro_batch_size_per_gpu": "auto",
    "train_batch_size": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 5,
    "zero_optimization": {
        "stage": 2,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": "auto",
    },
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto", "torch_adam": True}},
    "scheduler": {
        "type": "WarmupDecayLR",
        "params": {
            "warmup_min_lr": "auto",
            "warmup_max_lr": "auto",
            "warmup_num_steps": "auto",
            "total_num_steps": "auto",
        },
    },
}

HF_DS3 = {  # no train_batch_size: DeepSpeed derives it from the micro batch and its own world size
    **{k: v for k, v in HF_DS.items() if k != "train_batch_size"},
    "log_level": "info",  # the engine's config dump, as DeepSpeed prints it at INFO
    "zero_optimization": {
        "stage": 3,
        "stage3_gather_16bit_weights_on_model_save": True,
        "stage3_param_persistence_threshold": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "reduce_bucket_size": "auto",
    },
}


@dataclass
class Case:
    name: str
    what: str
    argv: list[str]  # {py} {deepspeed} {torchrun} {accelerate} {port} {job} are filled in
    env: dict[str, str] = field(default_factory=dict)
    configs: dict[str, dict] = field(default_factory=dict)  # written into the job's folder as JSON


def _ds_launch(cfg: str, *more: str, gpus: int = 1) -> list[str]:
    return [
        "{deepspeed}",
        "--num_gpus",
        str(gpus),
        "--master_port",
        "{port}",
        "ds_train.py",
        "--deepspeed",
        "--deepspeed_config",
        cfg,
        *more,
    ]


def _torchrun(script: str, *more: str, n: int = 2) -> list[str]:
    return ["{torchrun}", "--nproc_per_node", str(n), "--master_port", "{port}", script, *more]


CASES = [
    Case(
        "deepspeed_zero0_launcher.log",
        "`deepspeed` launcher, one CPU rank, ZeRO stage 0 (fp32): launcher banners, the engine's config dump, "
        "steps_per_print lines (step=, RunningAvgSamplesPerSec=)",
        _ds_launch("ds_config.json"),
        configs={"ds_config.json": _ds(0)},
    ),
    Case(
        "deepspeed_zero1_launcher.log",
        "`deepspeed` launcher, one CPU rank, ZeRO stage 1, gradient accumulation 2",
        _ds_launch("ds_config.json"),
        configs={"ds_config.json": _ds(1, gradient_accumulation_steps=2)},
    ),
    Case(
        "deepspeed_zero2_timers.log",
        "`deepspeed` launcher, ZeRO stage 2 with wall_clock_breakdown (the per-step `time (ms)` timer lines)",
        _ds_launch("ds_config.json"),
        configs={"ds_config.json": _ds(2, wall_clock_breakdown=True)},
    ),
    Case(
        "deepspeed_zero3_bf16.log",
        "`deepspeed` launcher, ZeRO stage 3 with bf16 on CPU: the stage-3 partitioning and memory lines",
        _ds_launch("ds_config.json"),
        configs={"ds_config.json": _ds(3, bf16={"enabled": True})},
    ),
    Case(
        "deepspeed_zero2_torchrun_2ranks.log",
        "`torchrun --nproc_per_node 2` of deepspeed.initialize, ZeRO stage 2 over gloo: torchrun's OMP_NUM_THREADS "
        "banner and DeepSpeed's lines from two ranks",
        _torchrun("ds_train.py", "--deepspeed", "--deepspeed_config", "ds_config.json"),
        configs={"ds_config.json": _ds(2)},
    ),
    Case(
        "deepspeed_nccl_debug_env.log",
        "`deepspeed` launcher with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=ALL, TORCH_DISTRIBUTED_DEBUG=DETAIL, "
        "TORCH_CPP_LOG_LEVEL=INFO set, ZeRO stage 1 on two gloo ranks (the c10d/gloo INFO lines, no NCCL on CPU)",
        _ds_launch("ds_config.json", gpus=2),
        env={
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "ALL",
            "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
            "TORCH_CPP_LOG_LEVEL": "INFO",
        },
        configs={"ds_config.json": _ds(1)},
    ),
    Case(
        "torchrun_gloo_allreduce.log",
        "`torchrun --nproc_per_node 2` of a gloo all_reduce/all_gather script, torchrun's default output",
        _torchrun("allreduce.py"),
    ),
    Case(
        "torchrun_gloo_allreduce_verbose.log",
        "the same with LOGLEVEL=INFO, TORCH_CPP_LOG_LEVEL=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL: the elastic agent's "
        "rendezvous and worker-group lines",
        _torchrun("allreduce.py"),
        env={"LOGLEVEL": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
    ),
    Case(
        "accelerate_launch_cpu_2proc.log",
        "`accelerate launch --multi_gpu --num_processes 2` on CPU with no config file (its defaults warning; "
        "torch.distributed over gloo, MULTI_CPU), an Accelerator loop with gradient accumulation and tqdm bars",
        [
            "{accelerate}",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--main_process_port",
            "{port}",
            "accel_train.py",
        ],
    ),
    Case(
        "accelerate_launch_one_process.log",
        "`accelerate launch --cpu` with nothing else passed (one process, all defaults)",
        ["{accelerate}", "launch", "--cpu", "accel_train.py"],
    ),
    Case(
        "hf_trainer_gpt2_cpu.log",
        "HF Trainer, tiny random GPT-2 (2 layers) on CPU, logging_steps=1, eval every 10 steps, a checkpoint save: "
        "tqdm bars, per-step loss dicts, eval dicts, the train summary",
        ["{py}", "hf_train.py", "--out", "{job}/out", "--steps", "30", "--eval", "--save"],
    ),
    Case(
        "hf_trainer_gpt2_grad_ckpt_accum.log",
        "HF Trainer with gradient_checkpointing and gradient_accumulation_steps=2 (the use_cache warning it prints)",
        ["{py}", "hf_train.py", "--out", "{job}/out", "--steps", "30", "--grad-ckpt", "--accum", "2"],
    ),
    Case(
        "hf_trainer_gpt2_deepspeed_zero2.log",
        'HF Trainer with a ZeRO-2 ds_config ("auto" values) under the `deepspeed` launcher, on CPU',
        [
            "{deepspeed}",
            "--num_gpus",
            "1",
            "--master_port",
            "{port}",
            "hf_train.py",
            "--out",
            "{job}/out",
            "--steps",
            "20",
            "--deepspeed",
            "ds_config.json",
        ],
        configs={"ds_config.json": HF_DS},
    ),
    Case(
        "hf_trainer_gpt2_deepspeed_zero3_torchrun.log",
        "HF Trainer with a ZeRO-3 ds_config (log_level info: the config dump) under `torchrun --nproc_per_node 2`, "
        "with a checkpoint save; torch.distributed's FutureWarnings on every collective",
        _torchrun("hf_train.py", "--out", "{job}/out", "--steps", "16", "--save", "--deepspeed", "ds_config.json"),
        configs={"ds_config.json": HF_DS3},
    ),
    Case(
        "peft_lora_trainer_gpt2.log",
        "PEFT LoRA (r=8 on c_attn) of the tiny GPT-2 with the HF Trainer: the trainable-parameters line",
        ["{py}", "hf_train.py", "--out", "{job}/out", "--steps", "25", "--lora", "--eval"],
    ),
    Case(
        "pytorch_loop_warnings.log",
        "a plain PyTorch loop that prints the warnings healthy runs print: the DataLoader's worker count "
        "UserWarning, lr_scheduler.step() before optimizer.step(), torch.cpu.amp.autocast's FutureWarning",
        ["{py}", "-W", "default", "plain_warnings.py"],
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tools() -> dict[str, str]:
    bin_ = Path(sys.executable).parent
    return {"py": sys.executable, **{t: str(bin_ / t) for t in ("deepspeed", "torchrun", "accelerate")}}


def _env(case: Case) -> dict[str, str]:
    drop = ("OMP_", "KB_", "NCCL_", "TORCH_DISTRIBUTED", "TORCH_CPP", "LOGLEVEL", "CUDA_", "ACCELERATE_", "PYTHONWARN")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TQDM_MININTERVAL="0",
        PYTHONHASHSEED="0",
        TOKENIZERS_PARALLELISM="false",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env["HF_HOME"] = env.get("HF_HOME", str(Path.home() / ".cache" / "huggingface"))
    env.update(case.env)
    return env


def _scrub(text: str, job: Path) -> str:
    venv = str(Path(sys.executable).parent.parent)
    for real, shown in ((str(job), "/job"), (os.path.realpath(job), "/job"), (venv, "/opt/venv")):
        text = text.replace(real, shown)
    home = str(Path.home())
    if home not in ("/", ""):
        text = re.sub(re.escape(home) + r"(?=/|\b)", "/home/user", text)
    return text


def command_line(case: Case) -> str:
    """The command as the README shows it (tools by name, the job folder as /job)."""
    names = {"py": "python", "deepspeed": "deepspeed", "torchrun": "torchrun", "accelerate": "accelerate"}
    words = [w.format(**names, port="PORT", job="/job") for w in case.argv]
    env = " ".join(f"{k}={v}" for k, v in case.env.items())
    return f"{env} {' '.join(words)}".strip()


def run_case(case: Case, timeout: int) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="healthy_") as tmp:
        job = Path(tmp)
        for name, text in SCRIPTS.items():
            (job / name).write_text(textwrap.dedent(text).lstrip())
        for name, cfg in case.configs.items():
            (job / name).write_text(json.dumps(cfg, indent=2) + "\n")
        argv = [w.format(**_tools(), port=_free_port(), job=job) for w in case.argv]
        t0 = time.monotonic()
        p = subprocess.run(
            argv,
            cwd=job,
            env=_env(case),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, interleaved as a terminal or `> log 2>&1` shows it
            timeout=timeout,
        )
        took = time.monotonic() - t0
        text = p.stdout.decode("utf-8", errors="replace")
        if p.returncode != 0:
            raise SystemExit(f"{case.name}: exit code {p.returncode}\n{text[-4000:]}")
        return _scrub(text, job), took


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_readme(out: Path, made: dict[str, tuple[int, float]]) -> None:
    v = versions()
    rows = []
    for case in CASES:
        path = out / case.name
        if not path.exists():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").count("\n")
        rows.append(f"| `{case.name}` | {lines} | {case.what} | `{command_line(case)}` |")
    text = f"""# Healthy training logs

Generated output, not hand-written: every `.log` here is the stdout and stderr (one stream, as
`cmd > NAME.log 2>&1` captures it) of a small real job that ran to the end with nothing wrong, made on CPU by

    .venv/bin/python bench/make_healthy_logs.py            # all of them, into this folder
    .venv/bin/python bench/make_healthy_logs.py --only hf_trainer_gpt2_cpu.log

Regenerate them with the script rather than editing them. They are the corpus of output a healthy run prints
(DeepSpeed config dumps and progress lines, torchrun / accelerate / DeepSpeed launcher banners, tqdm bars, HF
Trainer loss dicts, the warnings healthy runs print) on which kb must answer nothing above its confidence gate
(tests/test_healthy_logs.py).

How they are made: each job runs in a fresh temporary folder holding the scripts and ds_config files written by
bench/make_healthy_logs.py (`SCRIPTS`, `CASES`: read them there); seeds are set (`torch.manual_seed`,
`transformers.set_seed`, `PYTHONHASHSEED=0`); models are built from configs with random weights (no download;
`HF_HUB_OFFLINE=1`); distributed jobs use gloo on the loopback address, with a free port (`PORT` below).
`TQDM_MININTERVAL=0`, so progress bars print every update, `\\r`-separated as in a real captured log.
Nothing is removed from the output except this machine's paths: the venv is shown as `/opt/venv`, the job's
temporary folder as `/job`, the home folder as `/home/user`. Timestamps, pids, ports and timings differ from run
to run.

Made with: {", ".join(f"{k} {val}" for k, val in v.items())}; {platform.system()} {platform.machine()},
{os.cpu_count()} CPUs, no GPU.

| log | lines | what it is | command (in the job folder) |
|---|---|---|---|
{chr(10).join(rows)}
"""
    (out / "README.md").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the logs and README.md (default: %(default)s)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="make only these logs (names from --list)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one job may take (default: %(default)s)")
    ap.add_argument("--min-lines", type=int, default=30, help="a log shorter than this fails (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.list:
        for case in CASES:
            print(f"{case.name}\n    {command_line(case)}")
        return 0
    names = {c.name for c in CASES}
    unknown = set(args.only or ()) - names
    if unknown:
        ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    made: dict[str, tuple[int, float]] = {}
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        text, took = run_case(case, args.timeout)
        lines = text.count("\n")
        if lines < args.min_lines:
            raise SystemExit(f"{case.name}: only {lines} lines\n{text}")
        (args.out / case.name).write_text(text, encoding="utf-8")
        made[case.name] = (lines, took)
        print(f"{case.name}: {lines} lines, {len(text):,} characters, {took:.0f} s", file=sys.stderr)
    write_readme(args.out, made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
