"""The framework integrations against a live Chronicle (live test server, real Celery worker,
PostgreSQL): a real transformers Trainer and a real Lightning Trainer train tiny random
models built from a config here (nothing is downloaded), on the CPU, for a few steps, through
Chronicle's callbacks; then the same frameworks' own MLflow integrations (`report_to=
"mlflow"`, `MLFlowLogger`) log to Chronicle's MLflow-compatible endpoints. Each test asserts
what arrived in Chronicle's tables."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# Before transformers, Lightning or mlflow are imported: nothing may reach a hub or send
# usage telemetry.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import MLFlowLogger
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from dashboard.selectors import goodput as goodput_selectors
from ingest.models import IngestBatch
from logbook.models import Checkpoint, CheckpointRestore, Interruption
from telemetry.models import Attempt, JobInterval, MetricPoint, Run, StepStart

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))

from chronicle_client.integrations.huggingface import ChronicleCallback  # noqa: E402
from chronicle_client.integrations.lightning import ChronicleLogger  # noqa: E402

torch.set_num_threads(1)  # tiny models: threads only add contention on a 2-core machine

FAST = {"retry_base_s": 0.02, "retry_cap_s": 0.3, "flush_interval_s": 0.05}
HOST = socket.gethostname()


@pytest.fixture
def chronicle(live_server: Any, ingest_token: str, tmp_path: Path) -> dict[str, Any]:
    """What a job passes to the integrations: the live server, a token, its own spool."""
    return {
        "url": live_server.url,
        "token": ingest_token,
        "spool_dir": tmp_path / "spool",
        **FAST,
    }


def _all_batches_done() -> bool:
    statuses = set(IngestBatch.objects.values_list("status", flat=True))
    assert "dead" not in statuses
    return bool(statuses) and statuses == {"done"}


def _points(run: Run, name: str, attempt: int) -> dict[int, float]:
    return dict(
        MetricPoint.objects.filter(
            series__run=run, series__name=name, series__attempt__number=attempt
        ).values_list("step", "value")
    )


def _step_starts(run: Run, attempt: int) -> list[tuple[int, float]]:
    return [
        (step, started.timestamp())
        for step, started in StepStart.objects.filter(
            attempt__run=run, attempt__number=attempt
        ).values_list("step", "started_at")
    ]


def _tree_size(path: Path, *, leave_out: str = "") -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != leave_out)


# --- Hugging Face transformers ---------------------------------------------------------------


class TokenData(torch.utils.data.Dataset):
    """Random token ids: a language-modelling batch needs no tokenizer."""

    def __init__(self, count: int, seq_len: int = 16, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 100, (count, seq_len), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


class RaiseAtStep(TrainerCallback):
    """A training bug that surfaces at one step."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            raise RuntimeError(f"boom at step {self.step}")


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=100,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


def hf_args(output_dir: Path, **overrides: Any) -> TrainingArguments:
    settings: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 6,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 3,
        "report_to": "none",
        "use_cpu": True,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "seed": 0,
    }
    settings.update(overrides)
    return TrainingArguments(**settings)


@pytest.mark.django_db(transaction=True)
def test_hf_trainer_reports_metrics_steps_checkpoints_and_evals(
    chronicle, celery_worker, wait, tmp_path
):
    # given a real Trainer on a tiny GPT-2 that saves and evaluates every 3 of its 6 steps
    model = tiny_gpt2()
    args = hf_args(tmp_path / "out", eval_strategy="steps", eval_steps=3)
    callback = ChronicleCallback("hf-tiny", **chronicle)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=TokenData(64),
        eval_dataset=TokenData(8, seed=1),
        callbacks=[callback],
    )

    # when it trains
    started = time.monotonic()
    with callback:
        trainer.train()
    trained_s = time.monotonic() - started

    # then every value the Trainer logged arrived at its global step
    wait(_all_batches_done, what="the worker")
    run = Run.objects.get(name="hf-tiny")
    history = trainer.state.log_history
    losses = {entry["step"]: entry["loss"] for entry in history if "loss" in entry}
    assert _points(run, "loss", 1) == pytest.approx(losses)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]
    assert sorted(_points(run, "learning_rate", 1)) == [1, 2, 3, 4, 5, 6]
    assert sorted(_points(run, "eval_loss", 1)) == [3, 6]
    assert set(_points(run, "train_runtime", 1)) == {6}
    # and the attempt started on this host and completed
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.status == Attempt.Status.COMPLETED and attempt.ended_at is not None
    assert attempt.resumed_from_step is None
    assert list(attempt.hosts.values_list("name", flat=True)) == [HOST]
    # and each step's start time, in order, for goodput
    starts = _step_starts(run, 1)
    assert [step for step, _ in starts] == [1, 2, 3, 4, 5, 6]
    times = [moment for _, moment in starts]
    assert times == sorted(times) and len(set(times)) == len(times)
    # and both checkpoints, timed, with their size on disk and directory
    checkpoints = {c.step: c for c in Checkpoint.objects.filter(run=run)}
    assert sorted(checkpoints) == [3, 6]
    for step, checkpoint in checkpoints.items():
        directory = tmp_path / "out" / f"checkpoint-{step}"
        assert 0 < checkpoint.blocking_save_s < trained_s  # a part of the training's time
        assert checkpoint.size_bytes == _tree_size(directory, leave_out="chronicle.json")
        assert checkpoint.uri == str(directory)
        assert checkpoint.attempt == attempt and checkpoint.status == "saved"
    # and the two evaluations as custom intervals
    evals = JobInterval.objects.filter(run=run, kind="custom", label="eval").order_by("step")
    assert [i.step for i in evals] == [3, 6]
    assert all(i.ended_at > i.started_at for i in evals)
    # and the model's shape and the training arguments as the run's description
    assert run.parameter_count == model.num_parameters()
    assert (run.n_layers, run.n_heads, run.head_dim) == (2, 2, 16)
    assert run.config["learning_rate"] == 1e-3 and run.config["save_steps"] == 3
    # and goodput is computed from the recorded steps, with the saves and evals as badput
    report = goodput_selectors.run_goodput(run=run)
    assert report.step_source == "recorded"
    assert report.result is not None and report.result.productive_s > 0
    assert report.result.badput_s["checkpoint_save"] > 0
    assert report.result.badput_s["custom:eval"] > 0


@pytest.mark.django_db(transaction=True)
def test_hf_crash_is_reported_and_resuming_is_the_next_attempt(
    chronicle, celery_worker, wait, tmp_path
):
    # given a Trainer that saves at step 3 and hits a bug at step 5
    output = tmp_path / "out"
    callback = ChronicleCallback("hf-crash", **chronicle)
    trainer = Trainer(
        model=tiny_gpt2(),
        args=hf_args(output),
        train_dataset=TokenData(64),
        callbacks=[callback, RaiseAtStep(5)],
    )

    # when it crashes inside the callback's block
    with pytest.raises(RuntimeError, match="boom at step 5"), callback:
        trainer.train()

    # then attempt 1 ended failed with the exception, and an interruption holds the traceback
    wait(_all_batches_done, what="the worker")
    run = Run.objects.get(name="hf-crash")
    first = Attempt.objects.get(run=run, number=1)
    assert first.status == Attempt.Status.FAILED
    assert first.end_reason == "RuntimeError: boom at step 5"
    interruption = Interruption.objects.get(run=run)
    assert interruption.attempt == first and interruption.root_cause.slug == "unknown"
    assert interruption.message.startswith("RuntimeError: boom at step 5")
    assert "Traceback" in interruption.message and "on_step_end" in interruption.message
    assert (interruption.step, interruption.lost_steps, interruption.planned) == (5, 2, False)
    assert list(interruption.hosts.values_list("name", flat=True)) == [HOST]
    # (step 5 raised in on_step_end, before the Trainer logged it)
    assert sorted(_points(run, "loss", 1)) == [1, 2, 3, 4]
    assert [step for step, _ in _step_starts(run, 1)] == [1, 2, 3, 4, 5]
    # and the checkpoint it resumes from records which attempt wrote it
    marker = json.loads((output / "checkpoint-3" / "chronicle.json").read_text())
    assert marker == {"run": "hf-crash", "attempt": 1}

    # when the job is started again by hand (no launcher restart count), from its checkpoint
    callback = ChronicleCallback("hf-crash", **chronicle)
    trainer = Trainer(
        model=tiny_gpt2(),
        args=hf_args(output),
        train_dataset=TokenData(64),
        callbacks=[callback],
    )
    with callback:
        trainer.train(resume_from_checkpoint=True)

    # then it is attempt 2, resumed from step 3, and it completed steps 4 to 6
    wait(_all_batches_done, what="the worker")
    second = Attempt.objects.get(run=run, number=2)
    assert second.status == Attempt.Status.COMPLETED and second.resumed_from_step == 3
    assert CheckpointRestore.objects.get(attempt=second).checkpoint.step == 3
    assert sorted(_points(run, "loss", 2)) == [4, 5, 6]
    assert [step for step, _ in _step_starts(run, 2)] == [4, 5, 6]
    assert first.pk == Attempt.objects.get(run=run, number=1).pk  # attempt 1 left as it was
    assert Attempt.objects.get(pk=first.pk).status == Attempt.Status.FAILED
    # and goodput sees one disruption and the work of steps 4-5 done twice
    report = goodput_selectors.run_goodput(run=run)
    assert report.result is not None and report.result.disruptions == 1
    assert report.result.badput_s["wasted_progress"] > 0


@pytest.mark.django_db(transaction=True)
def test_hf_crash_nothing_caught_is_reported_by_the_excepthook(
    chronicle, celery_worker, wait, tmp_path, capsys
):
    # given a training script without the `with` block, whose Trainer hits a bug at step 2
    callback = ChronicleCallback("hf-uncaught", **chronicle)
    trainer = Trainer(
        model=tiny_gpt2(),
        args=hf_args(tmp_path / "out", save_steps=100),
        train_dataset=TokenData(64),
        callbacks=[callback, RaiseAtStep(2)],
    )
    with pytest.raises(RuntimeError) as caught:
        trainer.train()
    assert sys.excepthook == callback._excepthook

    # when nothing catches the exception: Python hands it to sys.excepthook before exiting
    sys.excepthook(caught.type, caught.value, caught.tb)

    # then the traceback was printed first, then attempt 1 was reported failed
    assert "RuntimeError: boom at step 2" in capsys.readouterr().err
    assert sys.excepthook != callback._excepthook  # the hook removed itself
    wait(_all_batches_done, what="the worker")
    run = Run.objects.get(name="hf-uncaught")
    attempt = Attempt.objects.get(run=run, number=1)
    assert (attempt.status, attempt.end_reason) == ("failed", "RuntimeError: boom at step 2")
    assert Interruption.objects.get(run=run).lost_steps == 2  # nothing saved yet


# --- Lightning ---------------------------------------------------------------------------------


class TinyRegression(pl.LightningModule):
    def __init__(self, lr: float = 0.05, fail_at_step: int | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.global_step + 1 == self.hparams.fail_at_step:
            raise RuntimeError(f"boom at step {self.hparams.fail_at_step}")
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def regression_data(count: int = 64, seed: int = 0) -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 8, generator=generator)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    return torch.utils.data.DataLoader(data, batch_size=8, num_workers=0)


def lightning_trainer(root: Path, callbacks: list[Any], **overrides: Any) -> pl.Trainer:
    settings: dict[str, Any] = {
        "max_steps": 6,
        "accelerator": "cpu",
        "devices": 1,
        "log_every_n_steps": 1,
        "default_root_dir": str(root),
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "limit_val_batches": 0,
    }
    settings.update(overrides)
    return pl.Trainer(callbacks=callbacks, **settings)


@pytest.mark.django_db(transaction=True)
def test_lightning_reports_metrics_steps_checkpoints_and_evals(
    chronicle, celery_worker, wait, tmp_path
):
    # given a real Lightning Trainer that checkpoints every 2 steps and validates every 3
    chronicle_logger = ChronicleLogger("pl-tiny", **chronicle)
    checkpoints = ModelCheckpoint(every_n_train_steps=2, save_top_k=-1)
    trainer = lightning_trainer(
        tmp_path,
        [chronicle_logger, checkpoints],
        logger=chronicle_logger,
        val_check_interval=3,
        limit_val_batches=2,
        num_sanity_val_steps=1,  # the sanity check is not part of the attempt's evals
    )
    module = TinyRegression()

    # when it trains
    started = time.monotonic()
    trainer.fit(module, regression_data(), regression_data(16, seed=1))
    trained_s = time.monotonic() - started

    # then the losses arrived at the optimizer step that produced them
    wait(_all_batches_done, what="the worker")
    run = Run.objects.get(name="pl-tiny")
    assert sorted(_points(run, "train_loss", 1)) == [1, 2, 3, 4, 5, 6]
    assert sorted(_points(run, "val_loss", 1)) == [3, 6]
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.status == Attempt.Status.COMPLETED and attempt.resumed_from_step is None
    assert list(attempt.hosts.values_list("name", flat=True)) == [HOST]
    assert [step for step, _ in _step_starts(run, 1)] == [1, 2, 3, 4, 5, 6]
    # and each checkpoint, timed, with the size of the file written
    stored = {c.step: c for c in Checkpoint.objects.filter(run=run)}
    assert sorted(stored) == [2, 4, 6]
    for step, checkpoint in stored.items():
        path = Path(checkpoint.uri)
        assert path.name == f"epoch=0-step={step}.ckpt"
        assert path.parent == tmp_path / "chronicle" / "pl-tiny" / "checkpoints"
        assert checkpoint.size_bytes == path.stat().st_size
        assert 0 < checkpoint.blocking_save_s < trained_s  # a part of the training's time
    # and the two validations inside fit as eval intervals (not the sanity check)
    evals = JobInterval.objects.filter(run=run, kind="custom", label="eval").order_by("step")
    assert [i.step for i in evals] == [3, 6]
    # and the hyperparameters as the run's config, with the parameter count
    assert run.config == {"lr": 0.05, "fail_at_step": None}
    assert run.parameter_count == 9
    report = goodput_selectors.run_goodput(run=run)
    assert report.step_source == "recorded" and report.result.productive_s > 0


@pytest.mark.django_db(transaction=True)
def test_lightning_crash_is_reported_and_resuming_is_the_next_attempt(
    chronicle, celery_worker, wait, tmp_path
):
    # given a LightningModule that saves every 2 steps and fails in step 4
    chronicle_logger = ChronicleLogger("pl-crash", **chronicle)
    checkpoints = ModelCheckpoint(every_n_train_steps=2, save_top_k=-1, save_last=True)
    trainer = lightning_trainer(tmp_path, [chronicle_logger, checkpoints], logger=chronicle_logger)

    # when it trains, Lightning calls on_exception and re-raises
    with pytest.raises(RuntimeError, match="boom at step 4"):
        trainer.fit(TinyRegression(fail_at_step=4), regression_data())

    # then attempt 1 failed with the exception, and one interruption holds it
    wait(_all_batches_done, what="the worker")
    run = Run.objects.get(name="pl-crash")
    first = Attempt.objects.get(run=run, number=1)
    assert (first.status, first.end_reason) == ("failed", "RuntimeError: boom at step 4")
    interruption = Interruption.objects.get(run=run)
    assert interruption.attempt == first and "training_step" in interruption.message
    # three steps done, the last checkpoint at step 2: one step lost
    assert (interruption.step, interruption.lost_steps) == (3, 1)
    assert sorted(_points(run, "train_loss", 1)) == [1, 2, 3]

    # when the job is started again by hand from its last checkpoint
    chronicle_logger = ChronicleLogger("pl-crash", **chronicle)
    checkpoints = ModelCheckpoint(every_n_train_steps=2, save_top_k=-1, save_last=True)
    trainer = lightning_trainer(tmp_path, [chronicle_logger, checkpoints], logger=chronicle_logger)
    trainer.fit(TinyRegression(), regression_data(), ckpt_path="last")

    # then it is attempt 2 (the checkpoint said which attempt wrote it), resumed from step 2
    wait(_all_batches_done, what="the worker")
    second = Attempt.objects.get(run=run, number=2)
    assert second.status == Attempt.Status.COMPLETED and second.resumed_from_step == 2
    assert sorted(_points(run, "train_loss", 2)) == [3, 4, 5, 6]
    assert [step for step, _ in _step_starts(run, 2)] == [3, 4, 5, 6]
    assert Attempt.objects.get(pk=first.pk).status == Attempt.Status.FAILED
    assert sorted(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2, 4, 6]


# --- The frameworks' own MLflow integrations against Chronicle's MLflow API -------------------


@pytest.mark.django_db(transaction=True)
def test_hf_report_to_mlflow_lands_as_a_chronicle_run(
    mlflow_tracking, project, tmp_path, monkeypatch
):
    # given a Trainer with transformers' own MLflow callback and an experiment name
    os.environ["MLFLOW_EXPERIMENT_NAME"] = "hf-sft"
    # (its params and metrics go out in concurrent log-batch calls, up to mlflow's 10 async
    # threads: past the project's INGEST_PROJECT_MAX_IN_FLIGHT share of the server, Chronicle
    # answers 429 REQUEST_LIMIT_EXCEEDED with Retry-After, which mlflow's client retries by
    # default; the fixture's no-retries client would drop them. Retried here as a job's
    # client does, after Retry-After; with no backoff a 5xx still fails in moments.)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0")
    try:
        trainer = Trainer(
            model=tiny_gpt2(),
            args=hf_args(tmp_path / "out", report_to=["mlflow"], run_name="hf-mlflow"),
            train_dataset=TokenData(64),
        )
        # when it trains
        trainer.train()
    finally:
        del os.environ["MLFLOW_EXPERIMENT_NAME"]

    # then the MLflow run is a Chronicle run with the losses at their steps
    run = Run.objects.get(project=project, name="hf-mlflow")
    losses = {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}
    assert _points(run, "loss", 1) == pytest.approx(losses)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]
    assert sorted(_points(run, "train_runtime", 1)) == [6]
    # and the run ended FINISHED: attempt 1 completed
    assert Attempt.objects.get(run=run, number=1).status == Attempt.Status.COMPLETED
    # and the Trainer's arguments and the model config are the run's params
    assert run.config["learning_rate"] == "0.001" and run.config["n_layer"] == "2"
    # (all of them: transformers sends them in concurrent log-batch calls of 100)
    assert run.config == run.mlflow_run.params and len(run.config) > 100
    assert run.mlflow_run.experiment.name == "hf-sft"


@pytest.mark.django_db(transaction=True)
def test_lightning_mlflow_logger_lands_as_a_chronicle_run(mlflow_tracking, project, tmp_path):
    # given Lightning's own MLFlowLogger pointed at Chronicle
    mlflow_logger = MLFlowLogger(
        experiment_name="pl-sweep", run_name="pl-mlflow", tracking_uri=mlflow_tracking
    )
    trainer = lightning_trainer(tmp_path, [], logger=mlflow_logger, enable_checkpointing=False)

    # when it trains
    trainer.fit(TinyRegression(), regression_data())

    # then the losses are in Chronicle at Lightning's steps (0 for the first update)
    run = Run.objects.get(project=project, name="pl-mlflow")
    assert sorted(_points(run, "train_loss", 1)) == [0, 1, 2, 3, 4, 5]
    assert Attempt.objects.get(run=run, number=1).status == Attempt.Status.COMPLETED
    assert run.config["lr"] == "0.05"
    assert run.mlflow_run.run_uuid == mlflow_logger.run_id
