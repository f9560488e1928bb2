"""Chronicle for Hugging Face transformers' `Trainer`:

    chronicle = ChronicleCallback("llama-ft", url="http://chronicle:8000", token="chr_...")
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[chronicle])
    with chronicle:  # reports a crash (the Trainer tells callbacks nothing about exceptions)
        trainer.train(resume_from_checkpoint=True)

What it sends: the attempt's start on `on_train_begin` (`resumed_from_step` and a checkpoint
restore when resuming), everything the Trainer logs at its global step, each step's start
time, each checkpoint save with its blocking duration, size and directory, each evaluation
as a custom interval, and the attempt's end: completed on `on_train_end`, failed (or killed
on Ctrl-C) with the exception and an interruption on a crash.

Crashes: the Trainer calls no callback when `train()` raises, and `on_train_end` never
comes. Leaving the `with chronicle:` block with an exception reports it there. Without the
block, a hook installed on `sys.excepthook` reports an exception nothing caught, after
Python printed it (what a script run by `python` or `torchrun` that dies does; notebooks
don't use sys.excepthook, so use the block there). `install_excepthook=False` turns the hook
off.

The attempt number of a job restarted by hand comes from the checkpoint: each save writes
`chronicle.json` (run and attempt) into the checkpoint directory, and a job resumed from it
is the next attempt (see `_reporter.attempt_number`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from chronicle_client.client import Run
from chronicle_client.integrations._reporter import Reporter, now

logger = logging.getLogger("chronicle_client")

MARKER_FILE = "chronicle.json"

__all__ = ["ChronicleCallback"]


class ChronicleCallback(TrainerCallback):
    """Reports a Trainer's training to Chronicle. `run_kwargs` go to `chronicle_client.Run`
    (url, token, spool_dir, run_info, attempt, ...); rank comes from the Trainer."""

    def __init__(
        self,
        name: str,
        *,
        checkpoint_tier: str | None = None,
        install_excepthook: bool = True,
        **run_kwargs: Any,
    ) -> None:
        self.reporter = Reporter(name, run_kwargs, checkpoint_tier=checkpoint_tier)
        self.install_excepthook = install_excepthook
        self._previous_hook: Callable[..., Any] | None = None

    @property
    def run(self) -> Run | None:
        """This process's Run while training: log your own values with `run.log`."""
        return self.reporter.run

    # --- crash reporting -------------------------------------------------------------------

    def __enter__(self) -> ChronicleCallback:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.reporter.crashed(exc)
        else:
            self.reporter.close()
        self._remove_excepthook()

    def _excepthook(
        self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        previous = self._previous_hook or sys.__excepthook__
        try:
            previous(exc_type, exc, tb)  # the traceback first: reporting may take a while
        finally:
            self.reporter.crashed(exc)
            self._remove_excepthook()

    def _install_excepthook(self) -> None:
        if self.install_excepthook and self._previous_hook is None:
            self._previous_hook = sys.excepthook
            sys.excepthook = self._excepthook

    def _remove_excepthook(self) -> None:
        if self._previous_hook is None:
            return
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
            self._previous_hook = None
        # Otherwise someone chained a hook after ours: leave it; ours does nothing once the
        # attempt has ended.

    # --- the Trainer's hooks -----------------------------------------------------------------

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        # The Trainer has restored its state by now: global_step > 0 means it resumed.
        resumed = state.global_step if state.global_step > 0 else None
        restored_attempt = None
        if resumed is not None:
            restored_attempt = _read_marker(_checkpoint_dir(args, resumed), self.reporter.name)
        self.reporter.start_attempt(
            rank=args.process_index,
            resumed_from_step=resumed,
            restored_attempt=restored_attempt,
            run_info=_run_info(args, model),
        )
        self._install_excepthook()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.reporter.step_started(state.global_step + 1)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.reporter.step = state.global_step
        if control.should_save:
            # DefaultFlowCallback ran first and decided a save follows. On an accelerator the
            # step's kernels may still be running; wait for them so the save's time below
            # does not include the end of the step.
            _synchronize()
        # The Trainer logs, evaluates, then saves after this hook and calls on_save when the
        # save is done (after the files are written and old checkpoints rotated), so the save
        # is timed from here; `on_evaluate` moves the mark past an evaluation. The time also
        # holds the logging of this step (a .item() after the synchronize above: negligible).
        self.reporter.mark = now()

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if control.should_save:
            _synchronize()
        self.reporter.mark = now()  # an end-of-epoch save follows this hook, as above

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if logs and state.is_world_process_zero:
            self.reporter.log(logs, step=state.global_step)

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # An evaluation during training runs between on_step_end (the mark) and this hook.
        if self.reporter.attempt_open and self.reporter.mark is not None:
            self.reporter.interval("eval", self.reporter.mark, step=state.global_step)
        self.reporter.mark = now()

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        directory = _checkpoint_dir(args, state.global_step)
        self.reporter.checkpoint_saved(state.global_step, directory if directory.is_dir() else None)
        if args.should_save and directory.is_dir() and self.reporter.attempt is not None:
            marker = {"run": self.reporter.name, "attempt": self.reporter.attempt}
            try:
                (directory / MARKER_FILE).write_text(json.dumps(marker))
            except OSError as exc:
                logger.warning("chronicle: could not write %s: %s", directory / MARKER_FILE, exc)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.reporter.step = state.global_step
        self.reporter.end_attempt("completed")
        self.reporter.close()
        self._remove_excepthook()


def _checkpoint_dir(args: TrainingArguments, step: int) -> Path:
    return Path(args.output_dir or ".") / f"{PREFIX_CHECKPOINT_DIR}-{step}"


def _read_marker(directory: Path, name: str) -> int | None:
    try:
        marker = json.loads((directory / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("run") != name:
        return None
    attempt = marker.get("attempt")
    return attempt if isinstance(attempt, int) and attempt > 0 else None


def _run_info(args: TrainingArguments, model: Any) -> dict[str, Any]:
    """The model's shape (for MFU) and the training arguments, as far as they are known."""
    info: dict[str, Any] = {}
    config = getattr(model, "config", None)
    if model is not None and hasattr(model, "num_parameters"):
        info["parameter_count"] = int(model.num_parameters())
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    if isinstance(layers, int) and layers > 0:
        info["n_layers"] = layers
    head_dim = getattr(config, "head_dim", None)
    if isinstance(heads, int) and heads > 0:
        info["n_heads"] = heads
        if not isinstance(head_dim, int) and isinstance(hidden, int) and hidden % heads == 0:
            head_dim = hidden // heads
    if isinstance(head_dim, int) and head_dim > 0:
        info["head_dim"] = head_dim
    # to_dict() masks tokens; JSON round trip turns anything odd into text.
    info["config"] = json.loads(json.dumps(args.to_dict(), default=str))
    return info


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
