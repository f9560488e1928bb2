"""Pages of long lists: the dashboard tables (a page of PAGE_SIZE rows with links to the
neighbouring pages) and the JSON lists (DRF page-number pagination, the same numbers). A
page costs the same whatever the list's length: a slice of a queryset, or of a list already
computed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from telemetry.query_time import optional_integer_parameter

PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class Counted:
    """A queryset whose length is already known (the caller read every row's summary
    anyway): the paginators slice it without asking PostgreSQL for a COUNT first."""

    def __init__(self, items: QuerySet[Any], count: int) -> None:
        self.items = items
        self._count = count

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: slice) -> list[Any]:
        return list(self.items[index])


@dataclass(frozen=True)
class TablePage:
    """One page of a table for a template: its rows, where it sits, and links to the pages
    before and after (the request's other parameters kept)."""

    rows: Sequence[Any]
    number: int
    pages: int
    count: int
    first_index: int  # 1-based, 0 for an empty table
    last_index: int
    previous_url: str | None
    next_url: str | None

    @property
    def is_paged(self) -> bool:
        return self.pages > 1


def table_page(
    request: HttpRequest,
    items: QuerySet[Any] | Sequence[Any] | Counted,
    *,
    param: str = "page",
    size: int | None = None,
) -> TablePage:
    """The page named by query parameter `param` (a bad or out-of-range value shows the
    nearest page, as a reader following an old link expects); PAGE_SIZE rows by default."""
    page: Page = Paginator(items, size or PAGE_SIZE).get_page(request.GET.get(param))

    def link(number: int) -> str:
        query = request.GET.copy()
        query[param] = str(number)
        return f"?{query.urlencode()}"

    return TablePage(
        rows=list(page.object_list),
        number=page.number,
        pages=page.paginator.num_pages,
        count=page.paginator.count,
        first_index=page.start_index(),
        last_index=page.end_index(),
        previous_url=link(page.previous_page_number()) if page.has_previous() else None,
        next_url=link(page.next_page_number()) if page.has_next() else None,
    )


class ListPagination(PageNumberPagination):
    """?page=N&page_size=M (PAGE_SIZE by default, at most MAX_PAGE_SIZE); a page past the
    end, or not a number, is a 404 as DRF answers it."""

    page_size = PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int:
        """As DRF reads it (capped at MAX_PAGE_SIZE), except that a page_size that is not a
        whole number from 1, or given twice, is a 400 saying so instead of silently the
        default: a client asking for 500 rows and getting 50 would think the list ended."""
        given = request.query_params.getlist(self.page_size_query_param)
        if not given:
            return self.page_size
        raw = given[0]
        whole = raw.isascii() and raw.isdigit() and len(raw) <= 9
        if len(given) > 1 or not whole or int(raw) < 1:
            raise ValidationError(
                {"page_size": f"must be one whole number from 1 to {MAX_PAGE_SIZE}"}
            )
        return min(int(raw), self.max_page_size)

    def links(self) -> dict[str, Any]:
        """The envelope's paging keys: count (the whole list), next and previous (URLs of
        the neighbouring pages, null at either end)."""
        return {
            "count": self.page.paginator.count,
            "next": self.get_next_link(),
            "previous": self.get_previous_link(),
        }


def paginate(
    items: QuerySet[Any] | Sequence[Any] | Counted,
    request: Request,
) -> tuple[list[Any], dict[str, Any]]:
    """One page of `items` and its paging keys."""
    pagination = ListPagination()
    rows = pagination.paginate_queryset(items, request)
    return list(rows or []), pagination.links()


PAGE_PARAMETERS = [
    OpenApiParameter(
        "page", OpenApiTypes.INT, description="Page number, from 1 (404 past the end)."
    ),
    OpenApiParameter(
        "page_size",
        OpenApiTypes.INT,
        description=f"Rows per page ({PAGE_SIZE} by default, at most {MAX_PAGE_SIZE}).",
    ),
]


RUN_FILTER_PARAMETER = optional_integer_parameter("run", "Only this run (404 if not yours).")
