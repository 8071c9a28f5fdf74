"""Make long logs of real runs that fail late (figures and fixtures, not tests): the error is buried at the end of
hundreds of lines a healthy run prints.

    python bench/make_failing_logs.py [--out tests/fixtures/long_logs] [--steps 300]

Each log is an HF Trainer run of a tiny random GPT-2 (no download) on CPU under ``torchrun --nproc_per_node 2``
(gloo), logging every step, that fails at step ``--steps``:

- ``disk_full_save.log``: the checkpoint save at that step writes to a 2 MB tmpfs (``mount -t tmpfs``; needs root):
  torch.save fails as it does on a full disk;
- ``token_out_of_range.log``: the batch at that step holds a token id past the embedding's rows (a tokenizer
  with more tokens than the model): the embedding lookup fails;
- ``healthy_trainer_torchrun.log``: the same run with nothing wrong (it saves at the end, to a real folder).

``manifest.yaml`` next to them records what each should be answered with (tests/test_logs_long.py). Absolute
paths of this machine (the venv, the temporary folder) are replaced by ``/opt/venv`` and ``/job``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "long_logs"

SCRIPT = """
import sys, torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

torch.manual_seed(0)
MODE, OUT, STEPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
VOCAB, BATCH = 500, 4


class Tokens(Dataset):
    def __len__(self):
        return 4 * BATCH * (STEPS + 5)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, VOCAB, (32,), generator=g)
        if MODE == "token" and i // (2 * BATCH) == STEPS - 1:
            x[5] = VOCAB + 7  # an id the embedding does not have
        return {"input_ids": x, "labels": x}


model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=128, n_layer=2, n_head=4))
args = TrainingArguments(
    output_dir=OUT, per_device_train_batch_size=BATCH, max_steps=STEPS + 5, logging_steps=1,
    save_steps=STEPS if MODE in ("disk", "ok") else 10_000, report_to=[], use_cpu=True, dataloader_num_workers=0, seed=0,
)
Trainer(model=model, args=args, train_dataset=Tokens()).train()
"""

CASES = {
    "disk_full_save.log": "disk",
    "token_out_of_range.log": "token",
    "healthy_trainer_torchrun.log": "ok",  # the same run, nothing wrong: what the failing ones print before failing
}


def _run(mode: str, steps: int, work: Path) -> str:
    script = work / "train.py"
    script.write_text(SCRIPT)
    out = work / "out"
    if mode == "disk":
        out.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(out)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KB_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TQDM_MININTERVAL="0")
    torchrun = Path(sys.executable).with_name("torchrun")
    try:
        p = subprocess.run(
            [str(torchrun), "--nproc_per_node", "2", str(script), mode, str(out), str(steps)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        if mode == "disk":
            subprocess.run(["umount", str(out)], check=False)
    if (p.returncode == 0) != (mode == "ok"):
        raise SystemExit(f"{mode}: exit code {p.returncode}\n{p.stderr[-2000:]}")
    text = p.stdout + p.stderr
    venv = str(Path(sys.executable).parent.parent)
    return re.sub(re.escape(str(work)), "/job", text.replace(venv, "/opt/venv"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the logs (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=300, help="the step the run fails at (default: %(default)s)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, mode in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            text = _run(mode, args.steps, Path(tmp))
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"{name}: {text.count(chr(10))} lines, {len(text):,} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
