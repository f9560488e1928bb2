"""A run's logbook as Markdown that reads like the OPT-175B chronicles, and back.

Pure: no ORM. Export writes one `## <UTC time> [<role>: <author>] <title>` heading per entry,
newest first (or oldest first, the order the public chronicles read in), a short list of
facts (kind, attempt, steps, links, "Corrected by"), the config
changes as a before → after table, then the Markdown body. Import reads the same layout back,
so exporting and importing keeps every entry and field.

Layout of one entry (the fact lines are optional except Kind; they end at the first blank
line, so the body that follows can be any Markdown):

    ## 2021-11-30 19:24 UTC [on-call: Stephen] Attempt 37: manual requeue of 36

    - **Kind:** restart, drafted automatically
    - **Time:** 2021-11-30T19:24:07+00:00          (only when seconds are not zero)
    - **Local time:** 7:24pm PST                   (as the source wrote it)
    - **Attempt:** 37
    - **Steps:** 12,000<en dash>12,345
    - **Checkpoint:** step 12,000
    - **Incident:** #45                            (the run-local incident number)
    - **SDC record:** #3
    - **Corrected by:** the debrief of 2021-12-02 10:00 UTC: what really happened
    - **Count:** ~90 restarts                      (a counted entry; "~": approximate)
    - **Hosts out:** node-12, node-40              (a hardware swap)
    - **Hosts in:** spare-3
    - **Config changes:** 1 (before → after below)

    | Setting | Before | After |
    |---|---|---|
    | lr | 3e-4 | 1.5e-4 |

    The body, in Markdown.

A time known to a day only is written `## 2021-11-30 [on-call: ...]`; one known within a
window `## 2021-11-30 18:00 UTC <en dash> 2021-12-01 06:00 UTC [on-call: ...]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

# Role slugs as the heading spells them (the OPT chronicles write "[on-call: Stephen]").
ROLE_LABELS: dict[str, str] = {
    "oncall": "on-call",
    "cluster_manager": "cluster manager",
    "automation": "automation",
}
_ROLE_BY_LABEL = {label: slug for slug, label in ROLE_LABELS.items()}

HEADING_TIME_FORMAT = "%Y-%m-%d %H:%M"
TABLE_HEADER = "| Setting | Before | After |"
TABLE_RULE = "|---|---|---|"
AUTOMATIC_SUFFIX = ", drafted automatically"

# A line that starts an entry. Anything that looks like one but does not parse is an error,
# never silently taken for body text.
_ENTRY_START = re.compile(r"^## \d{4}-\d{2}-\d{2} ")
_HEADING = re.compile(
    r"^## (?P<day>\d{4}-\d{2}-\d{2})(?: (?P<hm>\d{2}:\d{2}) UTC)?"
    r"(?: \u2013 (?P<until>\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC)? "
    r"\[(?P<role>[a-z -]+): (?P<author>(?:\\.|[^\]\\])*)\] (?P<rest>.+)$"
)
# Body lines that would read as an entry heading get one more leading backslash on export
# and lose one on import (a line already starting with backslashes keeps them all).
_ESCAPED_START = re.compile(r"^\\*## \d{4}-\d{2}-\d{2} ")
_FACT = re.compile(r"^- \*\*(?P<key>[A-Za-z ]+):\*\* ?(?P<value>.*)$")
EN_DASH = "\u2013"
_STEPS = re.compile(r"^(?P<start>[\d,]+)(?:\s*[\u2013-]\s*(?P<end>[\d,]+))?$")
_CORRECTION = re.compile(
    r"^the (?P<kind>[a-z ]+) of (?P<at>\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC: (?P<title>.+)$"
)
_COUNT = re.compile(r"^(?P<approx>~)?(?P<count>[\d,]+)(?:\s+(?P<unit>.+))?$")
EXACT, DAY, WINDOW = "exact", "day", "window"
FACT_KEYS = (
    "Kind",
    "Time",
    "Local time",
    "Attempt",
    "Steps",
    "Checkpoint",
    "Incident",
    "SDC record",
    "Corrected by",
    "Count",
    "Hosts out",
    "Hosts in",
    "Config changes",
)


class ChronicleError(ValueError):
    """The file is not a logbook in the exported layout; the message names the line."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"Line {line}: {message}" if line is not None else message)


@dataclass(frozen=True)
class CorrectionRef:
    """The later entry that corrects one, as the chronicles name it: kind, time, title."""

    kind: str
    occurred_at: datetime
    title: str


@dataclass(frozen=True)
class ChronicleEntry:
    occurred_at: datetime
    author_name: str
    role: str
    kind: str
    title: str
    body: str = ""
    is_automatic: bool = False
    attempt: int | None = None
    step: int | None = None
    step_end: int | None = None
    checkpoint_step: int | None = None
    # The incident's run-local number (the same on every instance), not its database id.
    interruption_number: int | None = None
    sdc_replay_id: int | None = None
    config_changes: list[dict[str, str]] = field(default_factory=list)
    corrected_by: CorrectionRef | None = None
    time_precision: str = EXACT
    occurred_until: datetime | None = None
    local_time: str = ""
    count: int | None = None
    count_approximate: bool = False
    count_unit: str = ""
    hosts_out: list[str] = field(default_factory=list)
    hosts_in: list[str] = field(default_factory=list)


# --- Export ----------------------------------------------------------------------------------


def kind_label(kind: str) -> str:
    return kind.replace("_", " ")


def heading_time(moment: datetime) -> str:
    return f"{moment.astimezone(UTC).strftime(HEADING_TIME_FORMAT)} UTC"


def when_text(occurred_at: datetime, precision: str = EXACT, until: datetime | None = None) -> str:
    """The time as precisely as it is known: '2021-11-30 19:24 UTC', '2021-11-30' (the day,
    UTC) or '2021-11-30 18:00 UTC <en dash> 2021-12-01 06:00 UTC' (a window).
    Pages show the same."""
    if precision == DAY:
        return occurred_at.astimezone(UTC).strftime("%Y-%m-%d")
    if precision == WINDOW and until is not None:
        return f"{heading_time(occurred_at)} {EN_DASH} {heading_time(until)}"
    return heading_time(occurred_at)


def count_text(count: int, *, approximate: bool = False, unit: str = "") -> str:
    return f"{'~' if approximate else ''}{count:,}{' ' + unit if unit else ''}"


def correction_text(ref: CorrectionRef) -> str:
    """'the debrief of 2021-12-02 10:00 UTC: title' (also what the page shows inline)."""
    return f"the {kind_label(ref.kind)} of {heading_time(ref.occurred_at)}: {ref.title}"


def _steps_text(step: int, step_end: int | None) -> str:
    if step_end is None or step_end == step:
        return f"{step:,}"
    return f"{step:,}{EN_DASH}{step_end:,}"


def _cell(value: str) -> str:
    # Backslash first, so the pipe's escape is not itself escaped.
    return " ".join(str(value).splitlines()).replace("\\", "\\\\").replace("|", "\\|")


def _escape_author(name: str) -> str:
    return name.replace("\\", "\\\\").replace("]", "\\]")


def _escape_body(body: str) -> list[str]:
    lines = body.replace("\r\n", "\n").strip("\n").split("\n") if body.strip() else []
    return ["\\" + line if _ESCAPED_START.match(line) else line for line in lines]


def entry_to_markdown(entry: ChronicleEntry) -> str:
    role = ROLE_LABELS.get(entry.role, entry.role)
    author = _escape_author(entry.author_name or "unknown")
    title = " ".join(entry.title.split())
    prefix = f"Attempt {entry.attempt}: " if entry.attempt is not None else ""
    when = when_text(entry.occurred_at, entry.time_precision, entry.occurred_until)
    lines = [f"## {when} [{role}: {author}] {prefix}{title}", ""]
    facts = [("Kind", kind_label(entry.kind) + (AUTOMATIC_SUFFIX if entry.is_automatic else ""))]
    moment = entry.occurred_at.astimezone(UTC)
    if entry.time_precision == EXACT and (moment.second or moment.microsecond):
        facts.append(("Time", moment.isoformat()))
    if entry.local_time:
        facts.append(("Local time", " ".join(entry.local_time.split())))
    if entry.attempt is not None:
        facts.append(("Attempt", str(entry.attempt)))
    if entry.step is not None:
        facts.append(("Steps", _steps_text(entry.step, entry.step_end)))
    if entry.checkpoint_step is not None:
        facts.append(("Checkpoint", f"step {entry.checkpoint_step:,}"))
    if entry.interruption_number is not None:
        facts.append(("Incident", f"#{entry.interruption_number}"))
    if entry.sdc_replay_id is not None:
        facts.append(("SDC record", f"#{entry.sdc_replay_id}"))
    if entry.corrected_by is not None:
        facts.append(("Corrected by", correction_text(entry.corrected_by)))
    if entry.count is not None:
        unit = " ".join(entry.count_unit.split())
        facts.append(
            ("Count", count_text(entry.count, approximate=entry.count_approximate, unit=unit))
        )
    if entry.hosts_out:
        facts.append(("Hosts out", ", ".join(entry.hosts_out)))
    if entry.hosts_in:
        facts.append(("Hosts in", ", ".join(entry.hosts_in)))
    if entry.config_changes:
        facts.append(("Config changes", f"{len(entry.config_changes)} (before → after below)"))
    lines += [f"- **{key}:** {value}" for key, value in facts]
    lines.append("")
    if entry.config_changes:
        lines += [TABLE_HEADER, TABLE_RULE]
        lines += [
            f"| {_cell(c.get('key', ''))} | {_cell(c.get('before', ''))} "
            f"| {_cell(c.get('after', ''))} |"
            for c in entry.config_changes
        ]
        lines.append("")
    body = _escape_body(entry.body)
    if body:
        lines += [*body, ""]
    return "\n".join(lines)


def logbook_to_markdown(
    entries: Iterable[ChronicleEntry], *, title: str = "", oldest_first: bool = False
) -> str:
    """The whole logbook, newest entry first, or oldest first as the public chronicles read
    (ties: the order given). Import reads either order."""
    ordered = sorted(entries, key=lambda entry: entry.occurred_at, reverse=not oldest_first)
    parts = [f"# {title}\n"] if title else []
    parts += [entry_to_markdown(entry) for entry in ordered]
    return "\n".join(parts)


# --- Import ----------------------------------------------------------------------------------


def markdown_to_entries(text: str) -> list[dict[str, Any]]:
    """Parse an exported logbook back into entries (dicts with ChronicleEntry's fields, in
    file order). Text before the first entry (a title) is ignored. Raises ChronicleError
    naming the line of the first problem."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if "\x00" in text:
        # PostgreSQL's text cannot hold a NUL: refused here, naming its line, not a 500.
        line = next(number for number, line in enumerate(lines, start=1) if "\x00" in line)
        raise ChronicleError("the file holds a NUL character; a logbook is text.", line=line)
    starts = [index for index, line in enumerate(lines) if _ENTRY_START.match(line)]
    if not starts:
        raise ChronicleError(
            "no logbook entries found: each entry starts with a heading like "
            "'## 2021-11-30 19:24 UTC [on-call: Stephen] What happened'."
        )
    bounds = zip(starts, [*starts[1:], len(lines)], strict=True)
    return [asdict(_parse_entry(lines, start, end)) for start, end in bounds]


def _parse_entry(lines: Sequence[str], start: int, end: int) -> ChronicleEntry:
    heading = _HEADING.match(lines[start])
    if heading is None:
        raise ChronicleError(
            "an entry heading must read '## YYYY-MM-DD HH:MM UTC [role: author] title' "
            "(or '## YYYY-MM-DD [...' for a day, "
            f"'## YYYY-MM-DD HH:MM UTC {EN_DASH} YYYY-MM-DD HH:MM UTC [...' for a window).",
            line=start + 1,
        )
    role = _ROLE_BY_LABEL.get(heading["role"])
    if role is None:
        raise ChronicleError(
            f"unknown role {heading['role']!r}; expected one of {', '.join(_ROLE_BY_LABEL)}.",
            line=start + 1,
        )
    precision, occurred_at, until = _heading_when(heading, line=start + 1)
    author = re.sub(r"\\(.)", r"\1", heading["author"])
    index = start + 1
    while index < end and not lines[index].strip():
        index += 1
    facts: dict[str, tuple[str, int]] = {}
    while index < end and lines[index].strip():
        fact = _FACT.match(lines[index])
        if fact is None or fact["key"] not in FACT_KEYS:
            raise ChronicleError(
                "expected a fact line like '- **Kind:** restart' (facts end at a blank line).",
                line=index + 1,
            )
        facts[fact["key"]] = (fact["value"].strip(), index + 1)
        index += 1
    if "Kind" not in facts:
        raise ChronicleError("the entry has no '- **Kind:** ...' line.", line=start + 1)
    values = _parse_facts(facts)
    config_changes: list[dict[str, str]] = []
    if "Config changes" in facts:
        config_changes, index = _parse_table(lines, index, end, facts["Config changes"])
    attempt = values["attempt"]
    title = heading["rest"].strip()
    if attempt is not None and title.startswith(f"Attempt {attempt}: "):
        title = title[len(f"Attempt {attempt}: ") :].strip()
    if not title:
        raise ChronicleError("the entry has no title.", line=start + 1)
    body_lines = [
        line[1:] if _ESCAPED_START.match(line) and line.startswith("\\") else line
        for line in lines[index:end]
    ]
    return ChronicleEntry(
        occurred_at=values["time"] if precision == EXACT and values["time"] else occurred_at,
        time_precision=precision,
        occurred_until=until,
        author_name=author,
        role=role,
        title=title,
        body="\n".join(body_lines).strip("\n"),
        config_changes=config_changes,
        **{key: value for key, value in values.items() if key != "time"},
    )


def _heading_when(heading: re.Match[str], *, line: int) -> tuple[str, datetime, datetime | None]:
    try:
        if heading["hm"] is None:
            if heading["until"] is not None:
                raise ChronicleError("a window gives its start time too.", line=line)
            day = datetime.strptime(heading["day"], "%Y-%m-%d").replace(tzinfo=UTC)
            return DAY, day, None
        start = datetime.strptime(f"{heading['day']} {heading['hm']}", HEADING_TIME_FORMAT)
        start = start.replace(tzinfo=UTC)
        if heading["until"] is None:
            return EXACT, start, None
        until = datetime.strptime(heading["until"], HEADING_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ChronicleError("the heading's date or time does not exist.", line=line) from None
    if until < start:
        raise ChronicleError("the time window ends before it starts.", line=line)
    return WINDOW, start, until


def _host_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _parse_facts(facts: dict[str, tuple[str, int]]) -> dict[str, Any]:
    kind_text, _ = facts["Kind"]
    automatic = kind_text.endswith(AUTOMATIC_SUFFIX)
    if automatic:
        kind_text = kind_text[: -len(AUTOMATIC_SUFFIX)]
    values: dict[str, Any] = {
        "kind": kind_text.strip().replace(" ", "_"),
        "is_automatic": automatic,
        "time": None,
        "attempt": None,
        "step": None,
        "step_end": None,
        "checkpoint_step": None,
        "interruption_number": None,
        "sdc_replay_id": None,
        "corrected_by": None,
        "local_time": facts.get("Local time", ("", 0))[0][:64],
        "count": None,
        "count_approximate": False,
        "count_unit": "",
        "hosts_out": _host_names(facts.get("Hosts out", ("", 0))[0]),
        "hosts_in": _host_names(facts.get("Hosts in", ("", 0))[0]),
    }
    if "Count" in facts:
        text, line = facts["Count"]
        counted = _COUNT.match(text)
        if counted is None:
            raise ChronicleError(
                f"count {text!r}: expected a number and what it counts, like '~90 restarts'.",
                line=line,
            )
        values["count"] = _integer(counted["count"], line)
        if values["count"] > _MAX_COUNT:  # LogbookEntry.count is an integer column
            raise ChronicleError(f"count {text[:40]!r} is too large.", line=line)
        values["count_approximate"] = counted["approx"] is not None
        values["count_unit"] = (counted["unit"] or "").strip()[:100]
    if "Time" in facts:
        text, line = facts["Time"]
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ChronicleError(f"{text!r} is not an ISO 8601 time.", line=line) from None
        if moment.tzinfo is None:
            raise ChronicleError("the exact time needs its UTC offset.", line=line)
        try:
            values["time"] = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
            raise ChronicleError(f"{text!r} is out of range in UTC.", line=line) from None
    if "Attempt" in facts:
        values["attempt"] = _integer(*facts["Attempt"])
    if "Steps" in facts:
        text, line = facts["Steps"]
        steps = _STEPS.match(text)
        if steps is None:
            raise ChronicleError(
                f"steps {text!r}: expected '1,200' or '1,200{EN_DASH}1,345'.", line=line
            )
        values["step"] = _integer(steps["start"], line)
        if steps["end"] is not None:
            values["step_end"] = _integer(steps["end"], line)
            if values["step_end"] < values["step"]:
                raise ChronicleError("the step range ends before it starts.", line=line)
    if "Checkpoint" in facts:
        text, line = facts["Checkpoint"]
        values["checkpoint_step"] = _integer(text.removeprefix("step").strip(), line)
    if "Incident" in facts:
        text, line = facts["Incident"]
        values["interruption_number"] = _integer(text.lstrip("#"), line)
    if "SDC record" in facts:
        text, line = facts["SDC record"]
        values["sdc_replay_id"] = _integer(text.lstrip("#"), line)
    if "Corrected by" in facts:
        text, line = facts["Corrected by"]
        ref = _CORRECTION.match(text)
        if ref is None:
            raise ChronicleError(
                "expected 'the <kind> of YYYY-MM-DD HH:MM UTC: <title>'.", line=line
            )
        values["corrected_by"] = CorrectionRef(
            kind=ref["kind"].replace(" ", "_"),
            occurred_at=datetime.strptime(ref["at"], HEADING_TIME_FORMAT).replace(tzinfo=UTC),
            title=ref["title"].strip(),
        )
    return values


def _integer(text: str, line: int) -> int:
    cleaned = text.replace(",", "").strip()
    if not (cleaned.isascii() and cleaned.isdigit()):
        raise ChronicleError(f"{text[:40]!r} is not a whole number.", line=line)
    # The length first: int() of over 4,300 digits raises, and no field holds past bigint.
    if len(cleaned) > len(str(_MAX_BIGINT)) or int(cleaned) > _MAX_BIGINT:
        raise ChronicleError(f"{text[:40]!r} is too large (at most {_MAX_BIGINT}).", line=line)
    return int(cleaned)


_MAX_BIGINT = 2**63 - 1
_MAX_COUNT = 2**31 - 1


def _parse_table(
    lines: Sequence[str], index: int, end: int, declared: tuple[str, int]
) -> tuple[list[dict[str, str]], int]:
    """The before → after table after the facts; returns its rows and the line after it."""
    text, fact_line = declared
    expected = _integer(text.split(" ", 1)[0], fact_line)
    while index < end and not lines[index].strip():
        index += 1
    if index + 1 >= end or lines[index].strip() != TABLE_HEADER:
        raise ChronicleError(f"expected the config table header {TABLE_HEADER!r}.", line=index + 1)
    index += 2  # header and rule
    rows: list[dict[str, str]] = []
    while index < end and lines[index].startswith("|"):
        cells = _split_row(lines[index])
        if len(cells) != 3:
            raise ChronicleError("a config row needs setting, before and after.", line=index + 1)
        rows.append({"key": cells[0], "before": cells[1], "after": cells[2]})
        index += 1
    if len(rows) != expected:
        raise ChronicleError(
            f"{expected} config changes announced, {len(rows)} rows found.", line=fact_line
        )
    return rows, index


def _split_row(line: str) -> list[str]:
    cells: list[str] = []
    current: list[str] = []
    chars = iter(line.strip()[1:])  # after the leading pipe
    for char in chars:
        if char == "\\":
            current.append(next(chars, ""))
        elif char == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        cells.append("".join(current).strip())
    return cells
