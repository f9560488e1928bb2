"""Chronicle for Lightning (`lightning.pytorch`, else `pytorch_lightning`): one object that is
both the Trainer's logger and one of its callbacks.

    chronicle = ChronicleLogger("llama-ft", url="http://chronicle:8000", token="chr_...")
    trainer = L.Trainer(logger=chronicle, callbacks=[chronicle], max_steps=10_000)
    trainer.fit(model, ckpt_path="last")

As the logger it receives what the LightningModule logs (`self.log`, at `global_step`: one
more than the step Lightning gives other loggers during training) and the hyperparameters
(sent as the run's config), and hears when a ModelCheckpoint has saved
(`after_save_checkpoint`). As a callback it sees the attempt start (`on_train_start`, after
a checkpoint was restored, so `global_step` is the step resumed from), each step's start,
the evaluations, the attempt's end (`on_train_end`) and crashes (`on_exception`: failed
with the exception and an interruption; killed on Ctrl-C). Give it both roles: the
save timing needs the callback's hooks and the logger's notification.

Checkpoints: ModelCheckpoint always runs after every other callback, so the save is timed
from this callback's last hook before it (the end of the training batch, of the epoch, or
of validation) until Lightning tells loggers the save is done. The time includes collecting
the state dicts and the write; on an accelerator it can also include the tail of the step's
kernels, since nothing waits for them before the save starts.

The attempt number is stored in each checkpoint (this callback's state), so a job resumed
by hand from a checkpoint is the next attempt (see `_reporter.attempt_number`). The
default checkpoint directory becomes `<default_root_dir>/chronicle/<run>/checkpoints`, the
same for every attempt, so `ckpt_path="last"` finds the previous attempt's checkpoints.
"""

from __future__ import annotations

import json
import logging
import re
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # checked against the `lightning` package; the standalone one is the same
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import Logger
else:
    try:
        from lightning.pytorch.callbacks import Callback
        from lightning.pytorch.loggers import Logger
    except ImportError:  # the standalone package
        from pytorch_lightning.callbacks import Callback
        from pytorch_lightning.loggers import Logger

from chronicle_client.client import Run
from chronicle_client.integrations._reporter import Mark, Reporter, now

logger = logging.getLogger("chronicle_client")

__all__ = ["ChronicleLogger"]


class ChronicleLogger(Logger, Callback):
    """Reports a Lightning Trainer's training to Chronicle. `run_kwargs` go to
    `chronicle_client.Run` (url, token, spool_dir, run_info, attempt, ...); the rank comes
    from the Trainer."""

    def __init__(
        self,
        name: str,
        *,
        checkpoint_tier: str | None = None,
        save_dir: str | None = None,
        **run_kwargs: Any,
    ) -> None:
        Logger.__init__(self)
        self.reporter = Reporter(name, run_kwargs, checkpoint_tier=checkpoint_tier)
        self._save_dir = save_dir
        self._trainer: pl.Trainer | None = None
        self._hyperparams: dict[str, Any] = {}
        self._restored_attempt: int | None = None
        self._eval_started: Mark | None = None

    @property
    def run(self) -> Run | None:
        """This process's Run while training: log your own values with `run.log`."""
        return self.reporter.run

    # --- Logger ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return "chronicle"

    @property
    def version(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.reporter.name) or "run"

    @property
    def save_dir(self) -> str | None:
        return self._save_dir

    def log_hyperparams(
        self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        values = vars(params) if isinstance(params, Namespace) else dict(params)
        # Kept for the run's config when the Run opens at on_train_start; JSON round trip
        # turns anything that is not JSON (modules, dtypes) into its text.
        self._hyperparams.update(json.loads(json.dumps(values, default=str)))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        # Chronicle numbers a step by the optimizer updates done, as checkpoints and resumes
        # are numbered: the loss of the first update is at step 1. Lightning hands loggers
        # the updates done before the batch (0 for the first), so use global_step, which
        # counts this batch's update by the time Lightning logs it.
        if self._trainer is not None:
            step = self._trainer.global_step
        self.reporter.log(metrics, step=step or 0)

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        # Called on global rank zero only, right after ModelCheckpoint wrote the file.
        path = getattr(checkpoint_callback, "_last_checkpoint_saved", None) or getattr(
            checkpoint_callback, "last_model_path", None
        )
        step = self._trainer.global_step if self._trainer is not None else self.reporter.step
        self.reporter.checkpoint_saved(step, path or None)

    def finalize(self, status: str) -> None:
        # After each fit/validate/test: flush. A crash was reported by on_exception already.
        self.reporter.flush_step_times()
        self.reporter.close()

    # --- Callback --------------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._trainer = trainer
        if self not in trainer.loggers:
            logger.warning(
                "ChronicleLogger is a callback but not a logger of this Trainer: metrics and "
                "checkpoint saves will not be reported. Pass it as logger= too."
            )

    def state_dict(self) -> dict[str, Any]:
        return {"run": self.reporter.name, "attempt": self.reporter.attempt}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        attempt = state_dict.get("attempt")
        if state_dict.get("run") == self.reporter.name and isinstance(attempt, int):
            self._restored_attempt = attempt

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        resumed = trainer.global_step if trainer.global_step > 0 else None
        run_info: dict[str, Any] = {
            "parameter_count": sum(p.numel() for p in pl_module.parameters()),
        }
        if self._hyperparams:
            run_info["config"] = self._hyperparams
        self.reporter.start_attempt(
            rank=trainer.global_rank,
            resumed_from_step=resumed,
            restored_attempt=self._restored_attempt if resumed is not None else None,
            run_info=run_info,
        )

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        # With gradient accumulation this comes once per micro-batch; the reporter keeps the
        # first, when the optimizer step began.
        self.reporter.step_started(trainer.global_step + 1)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.reporter.step = trainer.global_step
        self.reporter.mark = now()  # ModelCheckpoint's step-based save comes next

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.reporter.mark = now()  # an end-of-epoch save comes next

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Only validation inside fit is part of the attempt's time (not the sanity check).
        if not trainer.sanity_checking and self.reporter.attempt_open:
            self._eval_started = now()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._eval_started is not None:
            self.reporter.interval("eval", self._eval_started, step=trainer.global_step)
            self._eval_started = None
        self.reporter.mark = now()  # a save on validation comes next

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.reporter.step = trainer.global_step
        self.reporter.end_attempt("completed")

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.reporter.step = trainer.global_step
        self.reporter.crashed(exception)
