"""Docs and comments that cannot go stale: every migration, module (and name in it), setting
and README/docs section that the docs, the README and the code's comments and docstrings
name exists. A renamed module, a squashed migration, a dropped setting or a moved heading
fails here, not in a reader's hands. Checked on the text: no import, no database."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

from django.conf import global_settings

ROOT = Path(__file__).resolve().parent.parent
APPS = ("telemetry", "logbook", "ingest", "dashboard")
# Top-level packages whose dotted and slashed paths are checked.
PACKAGES = (*APPS, "config", "demo", "bench", "stack", "chaos", "tests", "clients")

# A migration by file name (0021_metricpoint_one_insert_trigger), and by number where the
# text says it is one ("migration 0021", "migrations 0005 and 0016", "(0019)").
MIGRATION_FILE = re.compile(r"\b(\d{4}_[a-z0-9_]+?)(?:\.py)?\b")
MIGRATION_NUMBERS = re.compile(r"\bmigrations? ((?:\d{4}(?:, | and |/| or )?)+)", re.I)
# A file in the repository (telemetry/services/device_health.py, docs/ingest.md), or a
# template or static file by its name there (logbook/incidents.html).
PATH = re.compile(
    r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r"|docs|static|templates)/[\w./-]*"
    r"\.(?:py|md|html|js|css|sql|json|csv|txt|toml|jsonl))\b"
)
# What follows a dot in a file's name, not a module's attribute.
EXTENSIONS = {"md", "html", "py", "png", "log", "json", "txt", "csv", "sql", "js", "css"}
# A dotted name: `telemetry.services.device_health.dcgm_readings_record`, config.prepared.
DOTTED = re.compile(r"(?<![\w.])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
# A setting or environment variable in backquotes: `RANK_BUCKET_S`, `INGEST_RATE_LIMIT=0`.
SETTING = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`")
# A section of the README or a docs page: README's "Scaling out", docs/operations.md,
# "Connection poolers", ([operations.md](operations.md), "Scaling out").
SECTION = re.compile(
    r"\b(README|(?:docs/)?[\w-]+\.md)(?:\]\([^)]*\))?(?:'s|\u2019s|\)?,|:)? \"([^\"]{3,80})\""
)
# Markdown headings.
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


@cache
def _tracked() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [ROOT / name for name in names if (ROOT / name).is_file()]


# bench/results/history/ is a record of earlier rounds, as they were: not checked.
HISTORY = ROOT / "bench" / "results" / "history"
# Other programs' environment variables, named in the docs as settings of theirs.
FOREIGN_SETTINGS = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_")


def _docs() -> list[Path]:
    return [
        path
        for path in _tracked()
        if path.suffix == ".md"
        and not path.is_relative_to(HISTORY)
        and not path.is_relative_to(ROOT / "tests" / "data")
    ]


def _comments_and_docstrings(path: Path) -> str:
    """A Python file's comments and docstrings (not its other strings: SQL, messages and the
    synthetic modules of the architecture tests name what they like)."""
    text = path.read_text()
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    found = [token.string[1:] for token in tokens if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                found.append(docstring)
    return "\n".join(found)


def _sources() -> dict[Path, str]:
    """Each text that names things: the Markdown pages whole, the Python files' comments
    and strings, the Makefile and .env.example whole."""
    sources = {path: path.read_text() for path in _docs()}
    for path in _tracked():
        if path.suffix == ".py" and "migrations" not in path.parts:
            sources[path] = _comments_and_docstrings(path)
        elif path.name in ("Makefile", ".env.example", "pyproject.toml"):
            sources[path] = path.read_text()
    return sources


@cache
def _migrations() -> tuple[set[str], set[str]]:
    files = {p.stem for p in ROOT.glob("*/migrations/[0-9][0-9][0-9][0-9]_*.py")}
    return files, {name[:4] for name in files}


@cache
def _defined(module: Path) -> set[str]:
    """The top-level names a module defines or imports."""
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@cache
def _task_names() -> frozenset[str]:
    """Celery task names (`@shared_task(name="ingest.batch_process")`): dotted, not modules."""
    return frozenset(
        name
        for path in ROOT.glob("*/tasks.py")
        for name in re.findall(r'name="([a-z_]+\.[a-z_]+)"', path.read_text())
    )


def _dotted_exists(dotted: str) -> bool:
    """`a.b.c` is a module or package, or a module followed by a name it defines (and that
    name's attribute: a class's method, not checked further); or a Celery task's name; or
    Django's `app.Model` (`telemetry.Host`)."""
    if dotted in _task_names():
        return True
    parts = dotted.split(".")
    models = [ROOT / parts[0] / "models.py", ROOT / parts[0] / "models" / "__init__.py"]
    if len(parts) >= 2 and any(m.is_file() and parts[1] in _defined(m) for m in models):
        return True
    base = ROOT / "clients" / "python" if parts[0] == "clients" else ROOT
    for cut in range(len(parts), 0, -1):
        path = base.joinpath(*parts[:cut])
        module = path.with_suffix(".py") if not path.is_dir() else path / "__init__.py"
        if module.is_file() or path.is_dir():
            rest = parts[cut:]
            if not rest:
                return True
            return module.is_file() and rest[0] in _defined(module)
    return False


@cache
def _code_words() -> frozenset[str]:
    """Every identifier-like word of the code and build files (settings, env reads, make)."""
    words: set[str] = set()
    for path in _tracked():
        if path.suffix in (".py", ".js", ".html", ".toml", ".yml", ".yaml", ".cfg", ".sh") or (
            path.name in ("Makefile", ".env.example")
        ):
            words.update(re.findall(r"[A-Z][A-Z0-9_]+", path.read_text(errors="replace")))
    return frozenset(words)


def _headings(page: Path) -> set[str]:
    """A page's headings, whole, without a closing parenthesis ("Scale-out, measured
    (issue 31, target 5)" is named "Scale-out, measured") and up to a colon ("One failure,
    one incident: window matching")."""
    found = {_plain(h) for h in HEADING.findall(page.read_text())}
    shorter = {re.sub(r" *\([^)]*\)$", "", h) for h in found} | {h.split(":")[0] for h in found}
    return found | shorter


def _plain(text: str) -> str:
    return re.sub(r"[`*_]", "", text).strip().lower()


def _page(name: str, source: Path) -> Path | None:
    if name == "README":
        return ROOT / "README.md"
    for candidate in (source.parent / name, ROOT / name, ROOT / "docs" / name):
        if candidate.is_file():
            return candidate
    return None


def stale_references(sources: dict[Path, str]) -> list[str]:
    """`path: what` for every reference in `sources` to something that does not exist."""
    files, numbers = _migrations()
    stale = []
    for path, text in sources.items():
        where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        for name in MIGRATION_FILE.findall(text):
            if name not in files and name[:4].isdigit() and not name.startswith(("20", "19")):
                stale.append(f"{where}: migration {name}")
        for group in MIGRATION_NUMBERS.findall(text):
            stale += [
                f"{where}: migration {n}" for n in re.findall(r"\d{4}", group) if n not in numbers
            ]
        for target in PATH.findall(text):
            if not any((base / target).exists() for base in (ROOT, ROOT / "templates")):
                stale.append(f"{where}: path {target}")
        for dotted in DOTTED.findall(text):
            if dotted.rsplit(".", 1)[1] not in EXTENSIONS and not _dotted_exists(dotted):
                stale.append(f"{where}: module or name {dotted}")
        for setting in SETTING.findall(text):
            if (
                setting not in _code_words()
                and not setting.startswith(FOREIGN_SETTINGS)
                and not hasattr(global_settings, setting)  # Django's own, e.g. SESSION_COOKIE_AGE
            ):
                stale.append(f"{where}: setting {setting}")
        for page_name, said in SECTION.findall(text):
            section = " ".join(said.split())
            page = _page(page_name, path)
            if page is None:
                stale.append(f"{where}: page {page_name}")
            elif _plain(section) not in _headings(page):
                stale.append(f'{where}: section {page_name}, "{section}"')
    return sorted(set(stale))


# References landed ahead of what they name (none now: the triage rework has landed). Each
# must still be stale (a line that resolves fails below, so this list only shrinks).
PENDING: set[str] = set()


def test_every_migration_module_setting_and_section_named_exists():
    sources = _sources()
    # The check would hold vacuously if it read nothing.
    assert ROOT / "docs" / "architecture.md" in sources
    assert ROOT / "telemetry" / "services" / "device_health.py" in sources
    stale = set(stale_references(sources))
    assert sorted(stale - PENDING) == []
    assert sorted(PENDING - stale) == [], "resolved: remove from PENDING"


def test_the_reference_check_catches_what_it_forbids(tmp_path: Path):
    # given a page naming one of each that does not exist, and one of each that does
    page = tmp_path / "page.md"
    unknown = "_".join(["NO", "SUCH", "SETTING"])  # not written whole here: this file is code
    page.write_text(
        "Migration 0999 and telemetry/migrations/0998_gone.py; telemetry/nowhere.py;\n"
        f"`telemetry.services.no_such_function` and `telemetry.nowhere`; `{unknown}`;\n"
        'README\'s "No such section"; docs/operations.md, "Nor this one".\n'
        "Fine: migration 0021, telemetry/services/device_health.py,\n"
        "`telemetry.services.device_health.dcgm_readings_record`, `INGEST_SWEEP_AFTER_S`,\n"
        'README\'s "Scaling out", docs/operations.md, "Connection poolers".\n'
    )
    # then each stale one is found, and only those
    assert stale_references({page: page.read_text()}) == sorted(
        f"{page}: {what}"
        for what in (
            "migration 0999",
            "migration 0998_gone",
            "path telemetry/migrations/0998_gone.py",
            "path telemetry/nowhere.py",
            "module or name telemetry.services.no_such_function",
            "module or name telemetry.nowhere",
            f"setting {unknown}",
            'section README, "No such section"',
            'section docs/operations.md, "Nor this one"',
        )
    )
