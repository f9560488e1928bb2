"""Goodput's ledger (pure, no database): every amount of a job's time as a span (start, end,
bucket, amount), built from the inputs by the segment algorithm telemetry.goodput
describes. Times are POSIX seconds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from telemetry.goodput_inputs import (
    ACCELERATOR_INIT,
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    CUSTOM_PREFIX,
    DATA_LOADING_ASYNC,
    DATA_LOADING_SYNC,
    INFRASTRUCTURE_RECOVERY,
    KIND_ACCELERATOR_INIT,
    KIND_CUSTOM,
    KIND_DATA_LOADING,
    KIND_TRAINING_PREP,
    MAD_FACTOR,
    PRODUCTIVE,
    PROGRAM_STARTUP,
    TRAINING_PREP,
    WASTED_PROGRESS,
    FloatArray,
    GoodputInputs,
    Interval,
)

# --- Typical step time ------------------------------------------------------------------------


def typical_step_time(step_times_s: npt.ArrayLike) -> float:
    """Mean of the step times at or below median + 3·MAD (the robust "ideal" step time of
    ml-goodput-measurement's compute_ideal_step_time): slow outliers such as a checkpoint
    stall do not pull it up. NaN for no steps."""
    times = np.asarray(step_times_s, dtype=np.float64)
    times = times[np.isfinite(times)]
    if times.size == 0:
        return math.nan
    median = _median(times)
    mad = _median(np.abs(times - median))
    return float(times[times <= median + MAD_FACTOR * mad].mean())


def _median(values: FloatArray) -> float:
    """np.median of finite values, to the bit (the middle one, or the mean of the middle two
    as (a + b) / 2), without its generic machinery: a Llama-scale run takes two medians
    for each of its 467 attempts on the goodput page's first view."""
    half = values.size // 2
    if values.size % 2:
        return float(np.partition(values, half)[half])
    middle = np.partition(values, [half - 1, half])
    return float((middle[half - 1] + middle[half]) / 2)


# --- The ledger -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """What the algorithm found in one attempt's steps (shown beside the numbers)."""

    attempt: int
    first_step: int
    last_step: int
    resume_step: int  # r: steps after it were computed again (or never finished)
    kept_intervals: int
    wasted_intervals: int
    first_step_s: float
    typical_step_s: float
    program_startup_s: float
    # The step the next attempt resumed from (its checkpoint: the step before the next
    # attempt's first) and the steps lost, last step - that step, as DOMAIN.md, the logbook
    # and the incident count them. wasted_intervals is one fewer: the last step's interval
    # ends in the interruption, which infrastructure recovery counts. None/0 without a restart.
    resumed_from_step: int | None = None
    lost_steps: int = 0


@dataclass
class Ledger:
    """Every amount of time the algorithm assigned, as spans, plus the job's time bounds.

    Spans are kept as numpy chunks in the order they were added: summarise() adds each
    bucket's amounts in that order, so the sums are the same whichever way they were added."""

    job_start: float
    job_end: float
    segments: list[Segment] = field(default_factory=list)
    disruptions: int = 0
    # Buckets none of whose inputs were reported: "not reported", never a measured zero.
    not_reported: set[str] = field(default_factory=set)
    # Why goodput cannot be computed at all ("" when it can): without step data there is no
    # productive time to divide, and 0% would read as a measurement.
    not_computable: str = ""
    # (bucket, or a bucket per span; starts; ends; amounts)
    _chunks: list[tuple[str | list[str], FloatArray, FloatArray, FloatArray]] = field(
        default_factory=list, repr=False
    )
    _pending: list[tuple[str, float, float, float]] = field(default_factory=list, repr=False)
    _spans: Spans | None = field(default=None, repr=False)

    def add(self, bucket: str, start: float, end: float, amount: float) -> None:
        if amount == 0:
            return
        self._pending.append((bucket, start, max(start, end), amount))
        self._spans = None

    def add_many(
        self, bucket: str | list[str], starts: FloatArray, ends: FloatArray, amounts: FloatArray
    ) -> None:
        """Many spans at once: `add` for each, in order (zero amounts are left out)."""
        self._flush()
        keep = amounts != 0
        if not keep.any():
            return
        names = bucket if isinstance(bucket, str) else [
            name for name, kept in zip(bucket, keep.tolist(), strict=True) if kept
        ]  # fmt: skip
        self._chunks.append(
            (names, starts[keep], np.maximum(starts[keep], ends[keep]), amounts[keep])
        )
        self._spans = None

    def _flush(self) -> None:
        if self._pending:
            names, starts, ends, amounts = zip(*self._pending, strict=True)
            self._chunks.append(
                (list(names), np.array(starts, dtype=np.float64),
                 np.array(ends, dtype=np.float64), np.array(amounts, dtype=np.float64))
            )  # fmt: skip
            self._pending = []

    def spans(self) -> Spans:
        """All spans as arrays, with what finding those in a window needs (built once)."""
        if self._spans is None:
            self._flush()
            self._spans = Spans.of(self._chunks)
        return self._spans

    def clipped(self, low: float, high: float) -> Ledger:
        """The same spans with the job's bounds moved (rolling windows over a time window)."""
        spans = self.spans()
        return Ledger(
            job_start=low,
            job_end=high,
            not_reported=self.not_reported,
            not_computable=self.not_computable,
            _chunks=self._chunks,
            _spans=spans,
        )


@dataclass(frozen=True)
class Spans:
    names: list[str]  # bucket names, in order of first appearance
    codes: npt.NDArray[np.intp]  # index into names, per span
    starts: FloatArray
    ends: FloatArray
    amounts: FloatArray
    # For windows: spans no longer than `short_s` ordered by start, and the longer (or NaN)
    # ones apart, so a window reads the few spans that can reach it, not all of them.
    by_start: npt.NDArray[np.intp]
    sorted_starts: FloatArray
    short_s: float
    long: npt.NDArray[np.intp]

    @classmethod
    def of(cls, chunks: list[tuple[str | list[str], FloatArray, FloatArray, FloatArray]]) -> Spans:
        names: list[str] = []
        index: dict[str, int] = {}
        codes = []
        for chunk_names, chunk_starts, *_ in chunks:
            listed = [chunk_names] if isinstance(chunk_names, str) else chunk_names
            for name in dict.fromkeys(listed):
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
            if isinstance(chunk_names, str):
                codes.append(np.full(chunk_starts.size, index[chunk_names], dtype=np.intp))
            else:
                codes.append(np.array([index[n] for n in chunk_names], dtype=np.intp))
        empty = np.zeros(0, dtype=np.float64)
        starts = np.concatenate([c[1] for c in chunks]) if chunks else empty
        ends = np.concatenate([c[2] for c in chunks]) if chunks else empty
        amounts = np.concatenate([c[3] for c in chunks]) if chunks else empty
        lengths = ends - starts
        short_s = float(np.quantile(lengths, 0.999)) if lengths.size else 0.0
        short = np.flatnonzero(lengths <= short_s)
        by_start = short[np.argsort(starts[short], kind="stable")]
        return cls(
            names=names,
            codes=np.concatenate(codes) if codes else np.zeros(0, dtype=np.intp),
            starts=starts,
            ends=ends,
            amounts=amounts,
            by_start=by_start,
            sorted_starts=starts[by_start],
            short_s=short_s,
            long=np.flatnonzero(~(lengths <= short_s)),
        )

    def in_window(
        self, low: float, high: float, exclusions: list[tuple[float, float]]
    ) -> tuple[npt.NDArray[np.intp], FloatArray]:
        """The bucket codes and counted amounts, in ledger order, of every span that can
        count in [low, high) (a superset of those that do: the others would add zeros), each
        weighted by its share inside the window and outside the exclusions.

        Without exclusions, a short span starting at or after `low` and more than twice the
        longest short span before `high` lies wholly inside: its visible part is its length,
        so its weight is exactly 1.0 and its amount counts as it is. Only the spans near the
        window's edges, and the long ones, go through _counted: a rolling window holds tens
        of thousands of step intervals, a few dozen of them at its edges. The values are the
        same, bit for bit, as _counted gives for every span (test_goodput_windows.py
        checks it)."""
        starts = self.sorted_starts
        first = int(np.searchsorted(starts, low - self.short_s, side="left"))
        last = int(np.searchsorted(starts, high, side="right"))
        if exclusions:
            chosen = np.sort(np.concatenate([self.by_start[first:last], self.long]), kind="stable")
            return self.codes[chosen], self._counted(chosen, low, high, exclusions)
        inner_first = int(np.searchsorted(starts, low, side="left"))
        inner_last = max(
            inner_first, int(np.searchsorted(starts, high - 2 * self.short_s, side="left"))
        )
        edges = np.concatenate(
            [self.by_start[first:inner_first], self.by_start[inner_last:last], self.long]
        )
        inner = self.by_start[inner_first:inner_last]
        chosen = np.sort(np.concatenate([inner, edges]), kind="stable")
        counted = self.amounts[chosen]
        counted[np.searchsorted(chosen, edges)] = self._counted(edges, low, high, [])
        return self.codes[chosen], counted

    def _counted(
        self,
        chosen: npt.NDArray[np.intp],
        low: float,
        high: float,
        exclusions: list[tuple[float, float]],
    ) -> FloatArray:
        """The amounts of the chosen spans counted in [low, high) and outside every exclusion:
        a span pro rata of its visible part, an instantaneous amount whole if it falls there."""
        starts, ends, amounts = self.starts[chosen], self.ends[chosen], self.amounts[chosen]
        lengths = ends - starts
        spans = lengths > 0
        weight = np.zeros_like(amounts)
        if spans.any():
            seen = _visible(starts[spans], ends[spans], low, high, exclusions)
            weight[spans] = seen / lengths[spans]
        points = ~spans
        if points.any():
            inside = (starts[points] >= low) & (starts[points] < high)
            for ex_start, ex_end in exclusions:
                inside &= ~((starts[points] >= ex_start) & (starts[points] < ex_end))
            weight[points] = inside.astype(np.float64)
        return amounts * weight


def _step_arrays(
    step_starts: Sequence[tuple[int, float]] | FloatArray,
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Steps and start times ordered by (step, start), as sorted() orders the pairs."""
    pairs = np.asarray(step_starts, dtype=np.float64).reshape(-1, 2)
    if np.all(pairs[1:, 0] > pairs[:-1, 0]):
        # Steps already increasing, as the packed step starts come: that is the order.
        return pairs[:, 0].astype(np.int64), pairs[:, 1].copy()
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order, 0].astype(np.int64), pairs[order, 1]


NO_STEP_DATA = (
    "not computable: no step data (no step start or step time was reported), so there is "
    "no productive time to divide by the elapsed time"
)
STEP_BUCKETS = (PRODUCTIVE, PROGRAM_STARTUP, WASTED_PROGRESS, INFRASTRUCTURE_RECOVERY)


def _not_reported(inputs: GoodputInputs, *, stepped: bool) -> set[str]:
    """The buckets with no input at all: their zero would be a guess, not a measurement."""
    kinds = {interval.kind for interval in inputs.intervals}
    missing = {
        bucket
        for bucket, present in (
            (ACCELERATOR_INIT, KIND_ACCELERATOR_INIT in kinds),
            (TRAINING_PREP, KIND_TRAINING_PREP in kinds),
            (DATA_LOADING_SYNC, KIND_DATA_LOADING in kinds),
            (CHECKPOINT_SAVE, bool(inputs.checkpoint_saves)),
            (CHECKPOINT_RESTORE, bool(inputs.restores)),
        )
        if not present
    }
    return missing if stepped else missing | set(STEP_BUCKETS)


def build_ledger(inputs: GoodputInputs) -> Ledger | None:
    """Assign the job's time to buckets. None when there is no job time at all."""
    attempts = sorted(inputs.attempts, key=lambda a: a.number)
    arrays = {a.number: _step_arrays(a.step_starts) for a in attempts}
    starts = [a.job_start for a in attempts if a.job_start is not None]
    first_steps = [float(arrays[a.number][1].min()) for a in attempts if arrays[a.number][0].size]
    if not starts and not first_steps:
        return None
    job_start = min(starts) if starts else min(first_steps)
    last = attempts[-1]
    if last.job_end is not None:
        job_end = last.job_end
    elif inputs.as_of is not None:
        job_end = inputs.as_of
    else:
        latest = [float(times.max()) for _, times in arrays.values() if times.size]
        job_end = max([job_start, *latest])
    ledger = Ledger(job_start=job_start, job_end=job_end)

    customs = sorted((i for i in inputs.intervals if i.kind == KIND_CUSTOM), key=lambda i: i.start)
    stepped = [a for a in attempts if arrays[a.number][0].size]
    ledger.not_reported = _not_reported(inputs, stepped=bool(stepped))
    if not stepped:
        ledger.not_computable = NO_STEP_DATA
        ledger.disruptions = len(attempts) - 1  # restarts are known even without steps
    for index, attempt in enumerate(stepped):
        steps, times = arrays[attempt.number]
        following = stepped[index + 1] if index + 1 < len(stepped) else None
        if following is None:
            resume = int(steps[-1])
        else:
            resume = int(arrays[following.number][0][0])
            ledger.disruptions += 1
        _segment(ledger, attempt.number, steps, times, resume, customs, following is not None)
        last_step_start = float(times[-1])
        if following is not None:
            restart = following.job_start
            if restart is None:
                restart = float(arrays[following.number][1].min())
            if restart > last_step_start:
                ledger.add(
                    INFRASTRUCTURE_RECOVERY, last_step_start, restart, restart - last_step_start
                )
        elif attempt is last and attempt.completed and attempt.job_end is not None:
            # The final step finished only if the job says it completed.
            tail = max(0.0, attempt.job_end - last_step_start)
            ledger.add(PRODUCTIVE, last_step_start, attempt.job_end, tail)

    _intervals(ledger, inputs.intervals, sorted(starts))
    seen_steps: set[int] = set()
    for save in inputs.checkpoint_saves:
        # One save per step counts (ml-goodput-measurement averages hosts per step).
        if save.step in seen_steps or save.blocking_s <= 0:
            continue
        seen_steps.add(save.step)
        begin = save.at - save.blocking_s
        ledger.add(CHECKPOINT_SAVE, begin, save.at, save.blocking_s)
        # Saves stall the step they happen in, so that step's productive time is shorter.
        ledger.add(PRODUCTIVE, begin, save.at, -save.blocking_s)
    for restore in inputs.restores:
        if restore.duration_s > 0:
            ledger.add(
                CHECKPOINT_RESTORE, restore.at - restore.duration_s, restore.at, restore.duration_s
            )
    return ledger


def _segment(
    ledger: Ledger,
    attempt: int,
    steps: npt.NDArray[np.int64],
    times: FloatArray,
    resume: int,
    customs: list[Interval],
    restarted: bool = False,
) -> None:
    """One attempt's step intervals, all at once (numpy): kept or wasted, custom intervals
    inside kept ones taken out, and program startup."""
    consecutive = steps[1:] == steps[:-1] + 1  # a gap: nothing known about what happened there
    begin, end = times[:-1], times[1:]
    delta = end - begin
    kept = consecutive & (steps[1:] <= resume)
    wasted = consecutive & (steps[1:] > resume)
    ledger.add_many(WASTED_PROGRESS, begin[wasted], end[wasted], delta[wasted])
    kept_begin, kept_end, kept_delta = begin[kept], end[kept], delta[kept]
    inside_s = np.zeros(kept_begin.size)
    if customs and kept_begin.size:
        pairs = _customs_inside(kept_begin, kept_end, customs)
        if pairs:
            ledger.add_many(
                [CUSTOM_PREFIX + (customs[c].label or "custom") for _, c in pairs],
                np.array([customs[c].start for _, c in pairs]),
                np.array([customs[c].end for _, c in pairs]),
                np.array([customs[c].end - customs[c].start for _, c in pairs]),
            )
            np.add.at(
                inside_s,
                np.array([k for k, _ in pairs], dtype=np.intp),
                np.array([customs[c].end - customs[c].start for _, c in pairs]),
            )
    adjusted = np.maximum(0.0, kept_delta - inside_s)
    startup = 0.0
    typical = math.nan
    if adjusted.size >= 2:
        typical = typical_step_time(adjusted[1:])
        startup = max(0.0, float(adjusted[0]) - typical)
    productive = adjusted.copy()
    if startup > 0:
        ledger.add(PROGRAM_STARTUP, float(kept_begin[0]), float(kept_end[0]), startup)
        productive[0] -= startup
    ledger.add_many(PRODUCTIVE, kept_begin, kept_end, productive)
    ledger.segments.append(
        Segment(
            attempt=attempt,
            first_step=int(steps[0]),
            last_step=int(steps[-1]),
            resume_step=resume,
            kept_intervals=int(adjusted.size),
            wasted_intervals=int(wasted.sum()),
            first_step_s=float(adjusted[0]) if adjusted.size else math.nan,
            typical_step_s=typical,
            program_startup_s=startup,
            resumed_from_step=resume - 1 if restarted else None,
            lost_steps=max(0, int(steps[-1]) - (resume - 1)) if restarted else 0,
        )
    )


def _customs_inside(
    begins: FloatArray, ends: FloatArray, customs: list[Interval]
) -> list[tuple[int, int]]:
    """(kept interval, custom) pairs where the custom interval lies fully inside the step
    interval, ordered by step interval then custom (the order the loop used to add them)."""
    found: list[tuple[int, int]] = []
    starts = np.array([c.start for c in customs])
    stops = np.array([c.end for c in customs])
    if np.all(begins[1:] >= begins[:-1]) and np.all(ends[1:] >= ends[:-1]):
        # Times in step order: the intervals holding a custom one are a contiguous run.
        highs = np.searchsorted(begins, starts, side="right")  # begin <= custom start
        lows = np.searchsorted(ends, stops, side="left")  # end >= custom end
        for c in np.flatnonzero(lows < highs).tolist():
            found += [(k, c) for k in range(int(lows[c]), int(highs[c]))]
    else:
        for c in range(len(customs)):
            inside = (begins <= starts[c]) & (stops[c] <= ends)
            found += [(k, c) for k in np.flatnonzero(inside).tolist()]
    return sorted(found)


def _intervals(ledger: Ledger, intervals: Sequence[Interval], job_starts: list[float]) -> None:
    sync_taken: set[int] = set()
    for interval in sorted(intervals, key=lambda i: i.start):
        duration = interval.end - interval.start
        if duration <= 0:
            continue
        if interval.kind == KIND_ACCELERATOR_INIT:
            ledger.add(ACCELERATOR_INIT, interval.start, interval.end, duration)
        elif interval.kind == KIND_TRAINING_PREP:
            ledger.add(TRAINING_PREP, interval.start, interval.end, duration)
        elif interval.kind == KIND_DATA_LOADING:
            # The first load after each job start blocks training; later ones overlap it.
            launch = int(np.searchsorted(job_starts, interval.start, side="right"))
            bucket = DATA_LOADING_ASYNC if launch in sync_taken else DATA_LOADING_SYNC
            sync_taken.add(launch)
            ledger.add(bucket, interval.start, interval.end, duration)
        # Custom intervals count only inside kept step intervals (see _segment); checkpoint
        # save/restore intervals arrive as CheckpointSave/Restore.


def _visible(
    starts: FloatArray,
    ends: FloatArray,
    low: float,
    high: float,
    exclusions: list[tuple[float, float]],
) -> FloatArray:
    """Seconds of each [start, end) inside [low, high) and outside every exclusion."""
    lo = np.maximum(starts, low)
    hi = np.minimum(ends, high)
    seen = np.clip(hi - lo, 0.0, None)
    for ex_start, ex_end in exclusions:
        seen -= np.clip(np.minimum(hi, ex_end) - np.maximum(lo, ex_start), 0.0, None)
    return np.clip(seen, 0.0, None)
