"""A project admin's topology import: CSV rows of host,rack,pod,cluster,site. Pure: text in,
placements (or the problems, each naming its line) out; no ORM.

The header names the columns (any order; `host` required, the levels optional, `superpod`
read as `pod`); an empty cell is a level the row does not say. A host twice is a problem, as
is a cluster without its site (a cluster is named within one).
"""

from __future__ import annotations

import csv
import io

from telemetry.hardware_names import hardware_name_problem

LEVELS = ("rack", "pod", "cluster", "site")
MAX_ROWS = 50_000
NAME_MAX_LENGTH = 100  # Host.rack, Host.pod, Cluster.name, Site.name
HOST_MAX_LENGTH = 255
MAX_PROBLEMS = 20
_ALIASES = {"superpod": "pod", "hostname": "host"}


class CsvProblem(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def placements_parse(text: str) -> dict[str, dict[str, str]]:
    """{host: {level: name}} of the rows (levels left empty are absent). Raises CsvProblem."""
    if "\x00" in text:
        raise CsvProblem(["the file holds a NUL character"])
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None:
        raise CsvProblem(["the file is empty: send a header row host,rack,pod,cluster,site"])
    columns = [_ALIASES.get(name.strip().lower(), name.strip().lower()) for name in header]
    unknown = [name for name in columns if name not in ("host", *LEVELS)]
    if "host" not in columns or unknown or len(set(columns)) != len(columns):
        raise CsvProblem(
            [f"line 1: the header must name host and any of {', '.join(LEVELS)} once each, "
             f"got {','.join(header)[:200]!r}"]
        )  # fmt: skip
    placements: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for number, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if number - 1 > MAX_ROWS:
            problems.append(f"more than {MAX_ROWS:,} rows; split the file")
            break
        if len(row) != len(columns):
            problems.append(f"line {number}: {len(row)} cells, the header has {len(columns)}")
            continue
        cells = {name: cell.strip() for name, cell in zip(columns, row, strict=True)}
        host = cells.pop("host")
        problem = _problem(host, cells, placements)
        if problem:
            problems.append(f"line {number}: {problem}")
        else:
            placements[host] = {level: name for level, name in cells.items() if name}
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        raise CsvProblem(problems)
    return placements


def _problem(host: str, cells: dict[str, str], seen: dict[str, dict[str, str]]) -> str:
    if not host:
        return "no host"
    if len(host) > HOST_MAX_LENGTH:
        return f"the host name is {len(host)} characters long; the limit is {HOST_MAX_LENGTH}"
    if problem := hardware_name_problem(host):
        return problem
    if host in seen:
        return f"host {host[:60]!r} is on an earlier line too"
    for level, name in cells.items():
        if len(name) > NAME_MAX_LENGTH:
            return f"{level} is {len(name)} characters long; the limit is {NAME_MAX_LENGTH}"
        if not name.isprintable():
            return f"{level} holds a control character"
    if cells.get("cluster") and not cells.get("site"):
        return "a cluster is named within its site: give the site too"
    return ""
