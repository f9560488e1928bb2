"""A run's logbook (the chronicles): read it, write and edit entries, export it as Markdown
and import such a file back. Viewers read; on-call and admins write (403 for a viewer's
write, 404 for anyone outside the project)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST

from logbook.choices import TimePrecision
from logbook.chronicles import ChronicleError, logbook_to_markdown, when_text
from logbook.models import LogbookEntry
from logbook.selectors import logbook as selectors
from logbook.services import entries as entry_services
from logbook.services import imports as import_services
from telemetry import display, run_cache
from telemetry.models import Membership, Run
from telemetry.paging import table_page
from telemetry.selectors import run_get_for_user, user_has_role

IMPORT_MAX_BYTES = 5 * 1024 * 1024
IMPORT_UNLINKED_SHOWN = 20  # messages; past that, one line says how many more
CONFIG_ROWS_BLANK = 3


class EntryForm(forms.Form):
    kind = forms.ChoiceField(choices=LogbookEntry.Kind.choices)
    role = forms.ChoiceField(choices=LogbookEntry.Role.choices, initial=LogbookEntry.Role.ONCALL)
    title = forms.CharField(max_length=300)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), required=False)
    occurred_at = forms.DateTimeField(
        required=False, label="Time", help_text="YYYY-MM-DD HH:MM; empty: now."
    )
    time_precision = forms.ChoiceField(
        choices=TimePrecision.choices,
        initial=TimePrecision.EXACT,
        required=False,
        label="Time known",
        help_text="Exact, to the day only, or within a window.",
    )
    occurred_until = forms.DateTimeField(
        required=False, label="Window end", help_text="Only for a window."
    )
    local_time = forms.CharField(
        max_length=64,
        required=False,
        label="Local time as written",
        help_text="e.g. 7:24pm PST; kept beside UTC.",
    )
    step = forms.IntegerField(min_value=0, required=False)
    step_end = forms.IntegerField(min_value=0, required=False, label="to step")
    attempt = forms.IntegerField(min_value=1, required=False, label="Attempt number")
    checkpoint = forms.IntegerField(min_value=0, required=False, label="Checkpoint step")
    incident = forms.IntegerField(
        min_value=1,
        required=False,
        label="Incident #",
        help_text="As its page and the triage queue show it (the number in its address).",
    )
    sdc_record = forms.IntegerField(min_value=1, required=False, label="SDC record #")
    count = forms.IntegerField(
        min_value=0, required=False, label="Count", help_text="A counted entry: ~90 restarts."
    )
    count_unit = forms.CharField(
        max_length=100, required=False, label="What was counted", help_text="e.g. restarts"
    )
    count_approximate = forms.BooleanField(required=False, label="Count is approximate (~)")
    hosts_out = forms.CharField(
        max_length=10_000,
        required=False,
        label="Hosts out",
        help_text="A hardware swap: names, comma-separated.",
    )
    hosts_in = forms.CharField(
        max_length=10_000,
        required=False,
        label="Hosts in (spares too)",
        help_text="Names, comma-separated.",
    )
    corrected_by = forms.TypedChoiceField(
        coerce=int, empty_value=None, required=False, label="Corrected by (a later entry)"
    )
    corrects = forms.TypedChoiceField(
        coerce=int, empty_value=None, required=False, label="Corrects (an earlier entry)"
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, run: Run, entry: LogbookEntry | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.run = run
        # Read and shown in the display zone (telemetry.middleware), which the label names.
        zone = display.zone_name(timezone.get_current_timezone())
        self.fields["occurred_at"].label = f"Time ({zone})"
        self.fields["occurred_until"].label = f"Window end ({zone})"
        if entry is None:
            del self.fields["corrected_by"]
            del self.fields["version"]
            self.fields["corrects"].choices = _entry_choices(selectors.correction_choices(run=run))
        else:
            del self.fields["corrects"]
            self.fields["corrected_by"].choices = _entry_choices(
                selectors.correction_choices(run=run, after=entry)
            )


def _entry_choices(entries: Any) -> list[tuple[Any, str]]:
    return [("", "—")] + [
        (
            e.pk,
            f"{when_text(e.occurred_at, e.time_precision, e.occurred_until)}"
            f" · {e.get_kind_display()} · {e.title[:80]}",
        )
        for e in entries
    ]


def _moment(value: datetime) -> str:
    return display.moment(value, timezone.get_current_timezone())


def _config_rows(request: HttpRequest) -> list[dict[str, str]]:
    keys = request.POST.getlist("config_key")
    befores = request.POST.getlist("config_before")
    afters = request.POST.getlist("config_after")
    rows = []
    for index, key in enumerate(keys):
        before = befores[index] if index < len(befores) else ""
        after = afters[index] if index < len(afters) else ""
        rows.append({"key": key, "before": before, "after": after})
    return rows


def _links_resolve(form: EntryForm) -> dict[str, Any]:
    """The form's link numbers as this run's records; a form error for each that is not."""
    data = form.cleaned_data
    links = selectors.entry_links_find(
        run=form.run,
        attempt=data.get("attempt"),
        checkpoint=data.get("checkpoint"),
        incident=data.get("incident"),
        sdc_record=data.get("sdc_record"),
    )
    values: dict[str, Any] = {}
    for field, (name, found) in links.items():
        if found is None and data.get(field) is not None:
            form.add_error(field, "This run has no such record.")
        values[name] = found
    for field in ("corrected_by", "corrects"):
        if field in form.fields:
            values[field] = selectors.run_entry_find(run=form.run, pk=data.get(field))
    return values


def _service_errors(form: EntryForm, exc: ValidationError) -> None:
    """Put a service's ValidationError on the form fields it names."""
    field_map = {"interruption": "incident", "sdc_replay": "sdc_record"}
    for name, errors in exc.message_dict.items():
        field = field_map.get(name, name)
        for message in errors:
            form.add_error(field if field in form.fields else None, message)


def _form_changes(form: EntryForm, request: HttpRequest) -> dict[str, Any] | None:
    """The service arguments from a valid form, or None (errors added to the form)."""
    if not form.is_valid():
        return None
    links = _links_resolve(form)
    if form.errors:
        return None
    data = form.cleaned_data
    changes = {
        "kind": data["kind"],
        "role": data["role"],
        "title": data["title"],
        "body": data["body"],
        "step": data["step"],
        "step_end": data["step_end"],
        "config_changes": _config_rows(request),
        "time_precision": data["time_precision"] or TimePrecision.EXACT,
        "occurred_until": data["occurred_until"],
        "local_time": data["local_time"],
        "count": data["count"],
        "count_unit": data["count_unit"],
        "count_approximate": data["count_approximate"],
        "hosts_out": _names(data["hosts_out"]),
        "hosts_in": _names(data["hosts_in"]),
        **{name: value for name, value in links.items() if name != "corrects"},
    }
    if data.get("occurred_at") is not None:
        changes["occurred_at"] = data["occurred_at"]
    if "corrects" in links:
        changes["corrects"] = links["corrects"]
    return changes


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _require_writer(request: HttpRequest, run: Run) -> None:
    if not user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=run.project_id
    ):
        raise PermissionDenied("Only on-call engineers and admins write the logbook.")


def _entry_display(entry: LogbookEntry) -> dict[str, Any]:
    target = entry.corrected_by
    return {
        "entry": entry,
        "correction": (
            {
                "pk": target.pk,
                "kind": target.get_kind_display().lower(),
                "occurred_at": target.occurred_at,
                "title": target.title,
            }
            if target is not None
            else None
        ),
    }


LOGBOOK_PAGE_SIZE = 50


def _logbook_page(
    request: HttpRequest, run: Run, *, form: EntryForm | None = None, status: int = 200
) -> HttpResponse:
    may_write = user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=run.project_id
    )
    # Drawn once per state of the run's logbook (every entry change bumps the run's
    # data_version): at Llama scale the entries and the new-entry form (its "Corrects" menu
    # lists every entry, hundreds) cost ~45 ms a view to render.
    version = run_cache.run_version_key(run=run)
    entry_fields = None
    if form is not None:  # a form sent back with its errors: drawn as it was posted
        entry_fields = _entry_fields(request, form)
    elif may_write:
        entry_fields = run_cache.cached_html(
            f"logbook-entry-form:{version}", lambda: _entry_fields(request, EntryForm(run=run))
        )

    def entries() -> str:
        # Newest first, a page at a time: a Llama-3-scale run has an entry per restart
        # (hundreds), and rendering every one's Markdown took over half a second on each view.
        page = table_page(request, selectors.run_logbook_entries(run=run), size=LOGBOOK_PAGE_SIZE)
        return run_cache.render_piece(
            "logbook/_entries.html",
            {
                "run": run,
                "page": page,
                "entries": [_entry_display(entry) for entry in page.rows],
                "may_write": may_write,
            },
        )

    return render(
        request,
        "logbook/logbook.html",
        {
            "run": run,
            "may_write": may_write,
            "form_errors": form is not None and bool(form.errors),
            "entry_fields": entry_fields,
            "entries": run_cache.cached_html(
                f"logbook-entries:{version}:{may_write}:{run_cache.query_key(request)}", entries
            ),
        },
        status=status,
    )


def _entry_fields(request: HttpRequest, form: EntryForm) -> str:
    return run_cache.render_piece(
        "logbook/_entry_fields.html",
        {"form": form, "config_rows": _posted_or_blank_rows(request)},
    )


def _posted_or_blank_rows(
    request: HttpRequest, existing: list[dict[str, str]] | None = None
) -> list[dict[str, str]]:
    rows = _config_rows(request) if request.method == "POST" else list(existing or [])
    rows = [row for row in rows if any(row.values())]
    return rows + [{"key": "", "before": "", "after": ""}] * CONFIG_ROWS_BLANK


@login_required
@require_http_methods(["GET", "POST"])
def run_logbook(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_get_for_user(user=request.user, run_id=run_id)
    if request.method == "GET":
        return _logbook_page(request, run)
    _require_writer(request, run)
    form = EntryForm(request.POST, run=run)
    changes = _form_changes(form, request)
    if changes is None:
        return _logbook_page(request, run, form=form, status=400)
    corrects = changes.pop("corrects", None)
    try:
        entry = entry_services.logbook_entry_create_correcting(
            run=run, user=request.user, corrects=corrects, **changes
        )
    except ValidationError as exc:
        _service_errors(form, exc)
        return _logbook_page(request, run, form=form, status=400)
    return redirect(reverse("logbook:run-logbook", args=[run.pk]) + f"#entry-{entry.pk}")


def _entry_initial(entry: LogbookEntry) -> dict[str, Any]:
    """The form's initial values: the audited snapshot, under the form's field names."""
    snapshot = entry_services.logbook_entry_snapshot(entry)
    return {
        **{key: value for key, value in snapshot.items() if key != "config_changes"},
        "incident": entry.interruption_id,
        "hosts_out": ", ".join(snapshot["hosts_out"]),
        "hosts_in": ", ".join(snapshot["hosts_in"]),
        "sdc_record": snapshot.pop("sdc_replay"),
        "version": entry.version,
    }


@login_required
@require_http_methods(["GET", "POST"])
def logbook_entry_edit(request: HttpRequest, run_id: int, pk: int) -> HttpResponse:
    entry = selectors.logbook_entry_get_for_user(user=request.user, run_id=run_id, pk=pk)
    run = entry.run
    may_write = user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=run.project_id
    )
    stale: entry_services.LogbookStaleEdit | None = None
    status = 200
    if request.method == "POST":
        if not may_write:
            raise PermissionDenied("Only on-call engineers and admins write the logbook.")
        version = _posted_version(request)
        if request.POST.get("action") == "delete":
            try:
                entry_services.logbook_entry_delete(entry=entry, user=request.user, version=version)
            except entry_services.LogbookStaleEdit as exc:
                stale = exc
            else:
                messages.success(request, f"Deleted the entry “{entry.title}”.")
                return redirect("logbook:run-logbook", run_id=run.pk)
            form = EntryForm(initial=_entry_initial(stale.current), run=run, entry=entry)
            status = 409
        else:
            form = EntryForm(request.POST, run=run, entry=entry)
            changes = _form_changes(form, request)
            if changes is not None and changes.get("occurred_at") == entry.occurred_at.replace(
                microsecond=0
            ):
                # The form shows whole seconds; an untouched time is not an edit.
                changes["occurred_at"] = entry.occurred_at
            if changes is None:
                status = 400
            else:
                try:
                    entry_services.logbook_entry_update(
                        entry=entry, user=request.user, version=version or 0, changes=changes
                    )
                except entry_services.LogbookStaleEdit as exc:
                    stale = exc
                    status = 409
                    # Keep what this person typed; the next save is made knowingly over
                    # the other change, which is shown above the form.
                    data = request.POST.copy()
                    data["version"] = str(exc.current.version)
                    form = EntryForm(data, run=run, entry=entry)
                    form.is_valid()
                except ValidationError as exc:
                    _service_errors(form, exc)
                    status = 400
                else:
                    messages.success(request, "Saved.")
                    return redirect(
                        reverse("logbook:run-logbook", args=[run.pk]) + f"#entry-{entry.pk}"
                    )
    else:
        form = EntryForm(initial=_entry_initial(entry), run=run, entry=entry)
    return render(
        request,
        "logbook/entry_edit.html",
        {
            "run": run,
            "entry": entry,
            "form": form,
            "may_write": may_write,
            "stale": stale,
            "config_rows": _posted_or_blank_rows(request, entry.config_changes),
            "history": list(selectors.logbook_entry_history(entry=entry)),
        },
        status=status,
    )


def _posted_version(request: HttpRequest) -> int | None:
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        return None


@login_required
def logbook_export(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_get_for_user(user=request.user, run_id=run_id)
    # ?order=oldest reads like the public chronicles, top to bottom in time.
    text = logbook_to_markdown(
        selectors.run_chronicle(run=run),
        title=f"Logbook of {run.project.slug}/{run.name}",
        oldest_first=request.GET.get("order") == "oldest",
    )
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    filename = f"{slugify(run.name) or 'run'}-logbook.md"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_POST
def logbook_import(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_get_for_user(user=request.user, run_id=run_id)
    _require_writer(request, run)
    upload = request.FILES.get("file")
    error = ""
    if upload is None:
        error = "Choose a Markdown file exported from a Chronicle logbook."
    elif upload.size > IMPORT_MAX_BYTES:
        error = f"The file is larger than {IMPORT_MAX_BYTES // (1024 * 1024)} MB."
    else:
        try:
            text = upload.read().decode("utf-8-sig")
            result = import_services.logbook_import(run=run, user=request.user, text=text)
        except UnicodeDecodeError:
            error = "The file is not UTF-8 text."
        except ChronicleError as exc:
            error = f"Nothing was imported. {exc}"
        except ValidationError as exc:
            error = f"Nothing was imported. {'; '.join(exc.messages)}"
        else:
            created = result.created
            messages.success(
                request,
                f"Imported {created} new entr{'y' if created == 1 else 'ies'}"
                + (" (the others were already in the logbook)." if created == 0 else "."),
            )
            # Each link the run lacks, by entry; the entry's text keeps the reference.
            for line in result.unlinked[:IMPORT_UNLINKED_SHOWN]:
                messages.warning(request, line[:1].upper() + line[1:] + ".")
            if len(result.unlinked) > IMPORT_UNLINKED_SHOWN:
                hidden = len(result.unlinked) - IMPORT_UNLINKED_SHOWN
                messages.warning(
                    request, f"{hidden} more links not found; each entry's text names them."
                )
            return redirect("logbook:run-logbook", run_id=run.pk)
    messages.error(request, error)
    return redirect("logbook:run-logbook", run_id=run.pk)
