"""Whole logs (kb.ask.logs): read to the end, error blocks found from their form, healthy lines never used.

The log lines here are written for these tests in the shapes the libraries print (a DeepSpeed INFO line, an NCCL
INFO line, torchrun's banner and failure summary, a rank-prefixed traceback); the healthy-log corpus made by real
runs is tests/fixtures/healthy_logs/ (tests/test_healthy_logs.py).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import main
from kb.ask.logs import (
    KEEP_BLOCKS,
    TRIAGE_MIN_LINES,
    is_error_line,
    iter_lines,
    read_log,
    triage_text,
    wants_triage,
)
from kb.ask.question import read_question

HEALTHY = [
    "[2026-03-02 09:14:07,311] [INFO] [config.py:1003:print]   zero_optimization ............ stage=3 "
    "offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='none')",
    "gpu-a17:4412:4498 [1] NCCL INFO Channel 03/0 : 1[1] -> 2[2] via P2P/IPC/read",
    "W0302 09:14:05.120000 4410 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
    "each process to be 1 in default, to avoid your system being overloaded",
    "[2026-03-02 09:20:11,902] [INFO] [timer.py:264:stop] epoch=0/micro_step=40/global_step=20, "
    "RunningAvgSamplesPerSec=31.8, CurrSamplesPerSec=32.0, MemAllocated=14.2GB, MaxMemAllocated=22.9GB",
    "/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:87: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None",
    "{'loss': 1.2034, 'grad_norm': 0.88, 'learning_rate': 1.9e-05, 'epoch': 0.12}",
    " 12%|█▏        | 120/1000 [03:10<23:12,  1.58s/it]",
]

FAILURE_TAIL = [
    "[rank5]: Traceback (most recent call last):",
    '[rank5]:   File "/work/train.py", line 88, in <module>',
    "[rank5]:     trainer.train()",
    '[rank5]:   File "/opt/venv/lib/python3.11/site-packages/torch/serialization.py", line 980, in _save',
    "[rank5]:     zip_file.write_record(name, storage, num_bytes)",
    "[rank5]: RuntimeError: [enforce fail at inline_container.cc:820] . unexpected pos 8832 vs 8720",
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/work/train.py", line 88, in <module>',
    "[rank1]:     dist.barrier()",
    "[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
    "Traceback (most recent call last):",
    '  File "/opt/venv/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-03-02_10:02:41",
    "  host      : gpu-a17",
    "  rank      : 5 (local_rank: 5)",
    "  exitcode  : 1 (pid: 4417)",
    "============================================================",
]


def _log(healthy_lines: int, tail: list[str] | None = None) -> str:
    body = [HEALTHY[i % len(HEALTHY)] for i in range(healthy_lines)]
    return "\n".join(body + (tail or []))


@pytest.mark.parametrize("line", HEALTHY)
def test_a_line_a_healthy_run_prints_is_never_an_error(line):
    assert not is_error_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "gpu-a17:4412:4498 [1] NCCL WARN Cuda failure 'out of memory'",
        "[2026-03-02 10:00:00,000] [ERROR] [launch.py:325:sigkill_handler] exits with return code = -9",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "train.py: error: unrecognized arguments: --zero_stage 3",
        "Segmentation fault (core dumped)",
    ],
)
def test_an_error_in_its_library_form_is_one(line):
    assert is_error_line(line)


def test_the_root_cause_is_the_first_failing_rank_and_the_launchers_lines_are_kept_apart():
    t = triage_text(_log(300, FAILURE_TAIL))
    assert t.lines == 300 + len(FAILURE_TAIL)
    assert t.failing_rank == 5  # torchrun's summary names it; rank 1 only saw the abort
    root = t.used[0]
    assert root.kind == "traceback" and root.rank == 5 and "unexpected pos" in root.head
    assert (root.start, root.end) == (301, 306)
    assert [b.kind for b in t.used][-1] == "summary"
    q = t.query_text()
    assert "unexpected pos" in q and "P2P/IPC" not in q and "OMP_NUM_THREADS" not in q and "Running" not in q
    assert "ChildFailedError" not in q  # what torchrun prints for any failure does not steer retrieval


def test_a_log_of_any_length_is_read_to_the_end_with_bounded_state():
    n = 200_000
    lines = (f"[rank{i % 8}]: RuntimeError: step {i} failed on host {i % 8}\n" for i in range(n))
    t = read_log(lines)
    assert t.lines == n and t.blocks_seen == n
    assert len(t.blocks) <= 2 * KEEP_BLOCKS
    assert t.used[0].repeats > 1000  # one error repeated on every step is one block, counted


def test_an_error_at_the_very_end_of_a_long_log_is_found():
    t = triage_text(_log(40_000, FAILURE_TAIL[:6]))
    assert t.found and t.used[0].start == 40_001


def test_the_users_words_around_the_log_are_kept():
    text = "llama 7b on 8 gpus crashed while saving:\n" + _log(50, FAILURE_TAIL) + "\nany idea?"
    t = triage_text(text)
    assert "llama 7b on 8 gpus" in t.prose and "any idea?" in t.prose


def test_only_a_long_paste_is_triaged():
    short = "\n".join(FAILURE_TAIL[:6])
    assert not wants_triage(short, True)
    assert wants_triage(_log(TRIAGE_MIN_LINES + 1), True)
    # a healthy log pasted whole has no error's form, but its lines are a program's
    assert wants_triage(_log(TRIAGE_MIN_LINES + 1), False)
    # a long question that is no log (a config pasted with a sentence) is read as a question
    keys = ["train_batch_size", "gradient_accumulation_steps", "steps_per_print", "wall_clock_breakdown"]
    keys += ["stage", "overlap_comm", "contiguous_gradients", "reduce_bucket_size", "stage3_prefetch_bucket_size"]
    keys += ["stage3_param_persistence_threshold", "sub_group_size", "stage3_max_live_parameters"]
    keys += ["stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "round_robin_gradients"]
    keys += ["enabled", "loss_scale", "loss_scale_window", "initial_scale_power", "hysteresis", "min_loss_scale"]
    keys += ["device", "pin_memory", "buffer_count", "fast_init", "gradient_clipping", "prescale_gradients"]
    config = "my zero3 run is slow, config:\n{\n" + "".join(f'  "{k}": "auto",\n' for k in keys) + "}"
    assert not wants_triage(config, False)
    mine = [f"{w} happened when I tried it" for w in "abcdefghijklmn"]  # 14 lines of the user's, each its own
    assert not wants_triage("\n".join(mine + HEALTHY[:1] * 13), False)  # 13 of 27 lines a program's
    assert wants_triage("\n".join(mine[:13] + HEALTHY[:1] * 14), False)  # 14 of 27
    progress = "\n".join(f"epoch {i} loss 0.{i:04d} lr 0.05" for i in range(30))  # printed: one shape, 30 numbers
    assert wants_triage(progress, False)


def test_a_file_is_all_log_and_a_paste_keeps_the_users_words_apart():
    notice = [
        "The following values were not passed to `accelerate launch` and had defaults used instead:",
        "\t`--num_machines` was set to a value of `1`",
        "To avoid this warning pass in values for each of the problematic parameters.",
    ]
    body = [*notice, *HEALTHY * 3, *(f"step {i} loss 2.{i:02d}" for i in range(12)), "training finished"]
    text = "\n".join(body)
    assert read_log(iter_lines(text)).prose == ""  # a file: nothing in it is the user's question
    pasted = triage_text(text)
    assert "accelerate launch" not in pasted.prose  # a notice with an indented item is a program's block
    assert "step" not in pasted.prose  # the log printed that shape before: output
    asked = triage_text("zero3 run hangs after step 11, is this log healthy?\n" + text + "\n\nwhy does it stop?")
    assert asked.prose.startswith("zero3 run hangs after step 11") and "why does it stop?" in asked.prose


def test_a_question_with_a_log_reads_the_blocks_not_the_healthy_lines():
    q = read_question(_log(500, FAILURE_TAIL))
    assert q.log is not None and q.is_log and not q.truncated
    assert "unexpected pos" in q.text and "P2P/IPC" not in q.text
    assert len(q.text) < 3000


def test_a_healthy_log_without_words_is_not_answered(fake_engine):
    ans = fake_engine.ask(_log(400))
    assert not ans.answered and ans.results == [] and ans.closest == []
    assert "No error in this log" in ans.message
    assert ans.log is not None and ans.log.lines == 400 and ans.log.used == []


def test_the_answer_carries_the_lines_it_used(fake_engine):
    ans = fake_engine.ask(_log(300, FAILURE_TAIL), lang="zh").to_dict()
    assert ans["log"]["failing_rank"] == 5
    assert ans["log"]["used"][0]["start_line"] == 301
    note = next(n["message"] for n in ans["notes"] if n["kind"] == "input")
    assert "已读完整个日志" in note and "第 301-306 行" in note


def test_cli_log_option_streams_a_file_and_shows_the_lines(cli_env, tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_log(2000, FAILURE_TAIL))
    r = CliRunner().invoke(main, ["ask", "--log", str(p), "--format", "plain"])
    assert r.exit_code in (0, 3), r.output
    assert "From your log" in r.output and "unexpected pos 8832 vs 8720" in r.output
    assert "read the whole log (2,024 lines" in r.output
    r = CliRunner().invoke(main, ["ask", "why did it crash", "--log", str(p), "--json"])
    out = json.loads(r.stdout)
    assert out["log"]["lines"] == 2024 and out["query"].startswith("why did it crash")


def test_cli_log_of_a_healthy_run_exits_3_and_says_why(cli_env, tmp_path):
    p = tmp_path / "ok.log"
    p.write_text(_log(120))
    r = CliRunner().invoke(main, ["ask", "--log", str(p)])
    assert r.exit_code == 3 and "No error in this log" in r.output


def test_cli_log_errors_name_the_file(cli_env, tmp_path):
    r = CliRunner().invoke(main, ["ask", "--log", str(tmp_path / "missing.log")])
    assert r.exit_code == 2 and "missing.log" in r.output
    r = CliRunner().invoke(main, ["ask", "-", "--log", "-"], input="x")
    assert r.exit_code == 2 and "stdin" in r.output
