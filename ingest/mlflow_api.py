"""MLflow-compatible tracking endpoints, mounted at /mlflow/api/2.0/mlflow/...: an unmodified
MLflow client with MLFLOW_TRACKING_URI=http://host/mlflow logs to Chronicle.

The contract is MLflow's (request fields, response shapes, `{"error_code", "message"}` errors
with MLflow's HTTP statuses), so these views are left out of Chronicle's OpenAPI schema.
Writes live in ingest.services.mlflow, reads in ingest.selectors.mlflow and the input checks in
ingest.mlflow_checks; these views parse, check auth and shape answers.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse, UnreadablePostError
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import CLIENT_DISCONNECTED, RETRY_AFTER_S, is_database_unreachable
from config.json_input import TooDeepError, depth_check
from config.parsers import unstorable_text
from ingest import mlflow_checks
from ingest import services as ingest_services
from ingest.authentication import HasIngestToken
from ingest.edge import ProjectShareMixin
from ingest.models import IngestToken, MlflowExperiment, MlflowRun
from ingest.schema import BatchError, parse_json
from ingest.selectors import mlflow as mlflow_reads
from ingest.selectors import token_get_by_plaintext
from ingest.services import mlflow as mlflow_writes
from ingest.throttles import BACKLOG_RETRY_AFTER_S, IngestTokenRateThrottle, backlog_is_full

logger = logging.getLogger(__name__)


class MlflowTokenAuthentication(BaseAuthentication):
    """An ingest token as MLflow clients send it: `Bearer <token>` (MLFLOW_TRACKING_TOKEN) or
    Basic with the token as the password (MLFLOW_TRACKING_USERNAME / _PASSWORD; a token
    given as the user name with an empty password is accepted too)."""

    def authenticate(self, request: Request) -> tuple[AnonymousUser, IngestToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, credentials = header.partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "bearer":
            plaintext = credentials
        elif scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credentials, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise exceptions.AuthenticationFailed("Malformed Basic credentials.") from None
            username, _, password = decoded.partition(":")
            plaintext = password or username
        else:
            raise exceptions.AuthenticationFailed(
                "Send the ingest token as 'Bearer <token>' or as the Basic password."
            )
        token = token_get_by_plaintext(plaintext=plaintext)
        if token is None:
            raise exceptions.AuthenticationFailed("Ingest token is invalid, revoked or expired.")
        ingest_services.token_touch(token=token)
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the token is missing or wrong.
        return 'Bearer realm="chronicle-mlflow"'


def _error(error_code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        {"error_code": error_code, "message": message},
        status=mlflow_checks.ERROR_STATUS.get(error_code, 500),
        headers=headers,
    )


@extend_schema(exclude=True)
class _MlflowView(ProjectShareMixin, APIView):
    authentication_classes = [MlflowTokenAuthentication]
    permission_classes = [HasIngestToken]
    throttle_classes = [IngestTokenRateThrottle]
    renderer_classes = [JSONRenderer]
    # Bodies are read raw (ingest.schema.parse_json): DRF's parser rejects bare NaN literals.
    parser_classes: list[type] = []

    def handle_exception(self, exc: Exception) -> Response:
        """Every failure in MLflow's shape: its client maps error_code to an exception, and
        retries only 429 and 5xx."""
        if isinstance(exc, mlflow_checks.MlflowError):
            if exc.status >= 500:
                logger.warning("MLflow %s %s: %s", exc.error_code, self.request.path, exc.message)
            return _error(exc.error_code, exc.message)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            message = str(exc.detail)
            if isinstance(exc, exceptions.NotAuthenticated):
                message = (
                    "An ingest token is required: set MLFLOW_TRACKING_TOKEN, or "
                    "MLFLOW_TRACKING_PASSWORD, to a Chronicle ingest token."
                )
            return _error(
                "UNAUTHENTICATED",
                message,
                {"WWW-Authenticate": self.get_authenticate_header(self.request)},
            )
        if isinstance(exc, exceptions.Throttled):
            wait = int(exc.wait or 1)
            # The project's share (ingest.edge) says which limit it is; the rate throttle
            # says only DRF's "Request was throttled".
            message = str(exc.detail)
            if message.startswith(str(exceptions.Throttled.default_detail)):
                message = f"Too many requests for this token; retry after {wait} s."
            return _error("REQUEST_LIMIT_EXCEEDED", message, {"Retry-After": str(wait)})
        if isinstance(exc, exceptions.MethodNotAllowed):
            return _error(
                "ENDPOINT_NOT_FOUND",
                f"No {self.request.method} endpoint at {self.request.path}.",
            )
        if isinstance(exc, BatchError):
            return _error("INVALID_PARAMETER_VALUE", exc.detail)
        if isinstance(exc, RequestDataTooBig):
            return _error("INVALID_PARAMETER_VALUE", "The request body is too large.")
        if isinstance(exc, UnreadablePostError):
            # The client reset mid-upload: its doing, not ours (config.errors, the same).
            logger.warning("client disconnected mid-upload: %s %s", self.request.method,
                           self.request.path)  # fmt: skip
            return _error("INVALID_PARAMETER_VALUE", CLIENT_DISCONNECTED)
        if is_database_unreachable(exc):
            logger.warning("MLflow request: database unavailable", exc_info=True)
            return _error(
                "TEMPORARILY_UNAVAILABLE",
                "The database is unavailable; retry later. Nothing was stored.",
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        logger.exception("MLflow request failed: %s %s", self.request.method, self.request.path)
        return _error("INTERNAL_ERROR", "Internal error; it has been logged.")

    @property
    def token(self) -> IngestToken:
        assert isinstance(self.request.auth, IngestToken)
        return self.request.auth

    def fields(self, *, unchecked: tuple[str, ...] = ()) -> dict[str, Any]:
        """The request's fields: the query string for GET (every value a string), the JSON
        body for POST. Every text is checked storable, except in the `unchecked` fields,
        whose values the view checks more strictly itself."""
        request = self.request
        if request.method == "GET":
            params = {key: request.query_params.get(key) for key in request.query_params}
            return _storable(params)
        raw = self.body()
        doc = parse_json(raw) if raw.strip() else {}
        if not isinstance(doc, dict):
            _depth_check(doc)
            raise mlflow_checks.MlflowError(
                "INVALID_PARAMETER_VALUE", "The request body must be a JSON object."
            )
        # orjson reads 1,024 levels; the checks below walk the document recursively. The
        # `unchecked` fields are the view's to check, depth included.
        checked = {key: value for key, value in doc.items() if key not in unchecked}
        _depth_check(checked)
        _storable(checked)
        return doc

    def body(self) -> bytes:
        raw = self.request.body
        if len(raw) > mlflow_checks.MAX_BATCH_REQUEST_BYTES:
            raise mlflow_checks.MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"The request body is {len(raw)} bytes; the limit is "
                f"{mlflow_checks.MAX_BATCH_REQUEST_BYTES}.",
            )
        return raw

    def backlog_check(self) -> None:
        if backlog_is_full():
            raise _Backlog()


def _depth_check(doc: Any) -> None:
    try:
        depth_check(doc)
    except TooDeepError as exc:
        raise mlflow_checks.MlflowError("INVALID_PARAMETER_VALUE", f"{exc}.") from exc


def _storable(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields, unless one holds text PostgreSQL cannot store (a NUL, a lone surrogate)."""
    problem = unstorable_text(fields)
    if problem:
        raise mlflow_checks.MlflowError(
            "INVALID_PARAMETER_VALUE", f"{problem[0].upper()}{problem[1:]}."
        )
    return fields


class _Backlog(mlflow_checks.MlflowError):
    def __init__(self) -> None:
        super().__init__(
            "REQUEST_LIMIT_EXCEEDED",
            f"The ingest backlog is above its high-water mark; retry after "
            f"{BACKLOG_RETRY_AFTER_S} s. Nothing was stored.",
        )


def _run_id(fields: dict[str, Any]) -> Any:
    # Most requests carry both run_id and the legacy run_uuid; log-batch only run_id.
    return fields.get("run_id") or fields.get("run_uuid")


def _required(fields: dict[str, Any], name: str) -> Any:
    value = fields.get(name)
    if value in (None, ""):
        raise mlflow_checks.MlflowError(
            "INVALID_PARAMETER_VALUE", f"Missing value for required parameter '{name}'."
        )
    return value


def _pairs(mapping: dict[str, str]) -> list[dict[str, str]]:
    return [{"key": key, "value": value} for key, value in sorted(mapping.items())]


def _experiment_out(experiment: MlflowExperiment) -> dict[str, Any]:
    experiment_id = mlflow_reads.experiment_public_id(experiment)
    return {
        "experiment_id": experiment_id,
        "name": experiment.name,
        "artifact_location": experiment.artifact_location or f"mlflow-artifacts:/{experiment_id}",
        "lifecycle_stage": "active",
        "creation_time": mlflow_checks.datetime_ms(experiment.created_at),
        "last_update_time": mlflow_checks.datetime_ms(experiment.updated_at),
        "tags": _pairs(experiment.tags),
    }


def _run_info_out(mlflow_run: MlflowRun) -> dict[str, Any]:
    experiment_id = mlflow_reads.experiment_public_id(mlflow_run.experiment)
    info: dict[str, Any] = {
        "run_id": mlflow_run.run_uuid,
        "run_uuid": mlflow_run.run_uuid,
        "run_name": mlflow_run.run_name,
        "experiment_id": experiment_id,
        "user_id": mlflow_run.user_id,
        "status": mlflow_run.status,
        "start_time": mlflow_run.start_time_ms,
        # Chronicle stores no artifacts: an mlflow-artifacts URI makes log_artifact fail
        # loudly (its endpoint answers 404) instead of writing to the job's local disk.
        "artifact_uri": f"mlflow-artifacts:/{experiment_id}/{mlflow_run.run_uuid}/artifacts",
        "lifecycle_stage": "active",
    }
    if mlflow_run.end_time_ms is not None:
        info["end_time"] = mlflow_run.end_time_ms
    return info


def _run_out(mlflow_run: MlflowRun) -> dict[str, Any]:
    return {
        "info": _run_info_out(mlflow_run),
        "data": {
            "metrics": mlflow_reads.run_latest_metrics(mlflow_run=mlflow_run),
            "params": _pairs(mlflow_run.params),
            "tags": _pairs(mlflow_run.tags),
        },
        "inputs": {},
    }


# --- Experiments -----------------------------------------------------------------------------


class ExperimentGetByNameApi(_MlflowView):
    def get(self, request: Request) -> Response:
        name = _required(self.fields(), "experiment_name")
        experiment = mlflow_writes.experiment_get_by_name(project=self.token.project, name=name)
        return Response({"experiment": _experiment_out(experiment)})


class ExperimentGetApi(_MlflowView):
    def get(self, request: Request) -> Response:
        experiment_id = _required(self.fields(), "experiment_id")
        experiment = mlflow_writes.experiment_get(
            project=self.token.project, experiment_id=experiment_id
        )
        return Response({"experiment": _experiment_out(experiment)})


class ExperimentCreateApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        experiment = mlflow_writes.experiment_create(
            project=self.token.project,
            name=fields.get("name"),
            artifact_location=str(fields.get("artifact_location") or ""),
            tags=mlflow_checks.check_key_values(
                fields.get("tags"), what="tags", value_limit=mlflow_checks.MAX_TAG_VALUE_LENGTH
            ),
        )
        return Response({"experiment_id": mlflow_reads.experiment_public_id(experiment)})


# --- Runs ------------------------------------------------------------------------------------


class RunCreateApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        mlflow_run = mlflow_writes.mlflow_run_create(
            token=self.token,
            experiment_id=fields.get("experiment_id"),
            run_name=fields.get("run_name"),
            user_id=fields.get("user_id") or "",
            start_time_ms=fields.get("start_time"),
            tags=mlflow_checks.check_key_values(
                fields.get("tags"), what="tags", value_limit=mlflow_checks.MAX_TAG_VALUE_LENGTH
            ),
        )
        return Response({"run": _run_out(mlflow_run)})


class RunUpdateApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        mlflow_run = mlflow_writes.mlflow_run_update(
            token=self.token,
            run_id=_run_id(fields),
            status=fields.get("status"),
            end_time_ms=fields.get("end_time"),
            run_name=fields.get("run_name"),
        )
        return Response({"run_info": _run_info_out(mlflow_run)})


class RunGetApi(_MlflowView):
    def get(self, request: Request) -> Response:
        mlflow_run = mlflow_reads.mlflow_run_get(
            project=self.token.project, run_id=_run_id(self.fields())
        )
        return Response({"run": _run_out(mlflow_run)})


class RunLogMetricApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        metric = mlflow_checks.check_metric(fields)
        self.backlog_check()
        mlflow_writes.mlflow_run_log(token=self.token, run_id=_run_id(fields), metrics=[metric])
        return Response({})


class RunLogParameterApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        params = mlflow_checks.check_key_values(
            [{"key": fields.get("key"), "value": _required(fields, "value")}],
            what="params",
            value_limit=mlflow_checks.MAX_PARAM_VALUE_LENGTH,
        )
        mlflow_writes.mlflow_run_log(token=self.token, run_id=_run_id(fields), params=params)
        return Response({})


class RunSetTagApi(_MlflowView):
    def post(self, request: Request) -> Response:
        fields = self.fields()
        tags = mlflow_checks.check_key_values(
            [{"key": fields.get("key"), "value": fields.get("value")}],
            what="tags",
            value_limit=mlflow_checks.MAX_TAG_VALUE_LENGTH,
        )
        mlflow_writes.mlflow_run_log(token=self.token, run_id=_run_id(fields), tags=tags)
        return Response({})


class RunLogBatchApi(_MlflowView):
    def post(self, request: Request) -> Response:
        common = mlflow_checks.metrics_only_batch(self.body())
        if common is not None:  # the usual request, already checked as it was decoded
            run_id, metrics = common
            _storable({"run_id": run_id})
            params: list[tuple[str, str]] = []
            tags: list[tuple[str, str]] = []
        else:
            run_id, metrics, params, tags = self._checked()
        if metrics:
            self.backlog_check()
        mlflow_writes.mlflow_run_log(
            token=self.token, run_id=run_id, metrics=metrics, params=params, tags=tags
        )
        return Response({})

    def _checked(self) -> tuple[Any, mlflow_checks.MetricColumns, list[Any], list[Any]]:
        """Any other body, checked field by field for its exact error."""
        # Metrics hold numbers and keys that check_key's pattern (letters, digits and
        # _-. :/) already keeps storable: walking their 1,000 objects again for a NUL or a
        # lone surrogate, or for their depth, cost more than checking them (check_metrics
        # checks the depth where a metric is not of the common shape).
        fields = self.fields(unchecked=("metrics",))
        raw_metrics = fields.get("metrics") or []
        if not isinstance(raw_metrics, list):
            raise mlflow_checks.MlflowError("INVALID_PARAMETER_VALUE", "'metrics' must be a list.")
        params = mlflow_checks.check_key_values(
            fields.get("params"), what="params", value_limit=mlflow_checks.MAX_PARAM_VALUE_LENGTH
        )
        tags = mlflow_checks.check_key_values(
            fields.get("tags"), what="tags", value_limit=mlflow_checks.MAX_TAG_VALUE_LENGTH
        )
        # Limits first: a 1,001-metric request is refused before checking each metric.
        mlflow_checks.check_batch_limits(
            metrics=len(raw_metrics), params=len(params), tags=len(tags)
        )
        return _run_id(fields), mlflow_checks.check_metrics(raw_metrics), params, tags


class MetricGetHistoryApi(_MlflowView):
    def get(self, request: Request) -> Response:
        fields = self.fields()
        mlflow_run = mlflow_reads.mlflow_run_get(project=self.token.project, run_id=_run_id(fields))
        key = _required(fields, "metric_key")
        max_results = fields.get("max_results")
        metrics, next_token = mlflow_reads.metric_history(
            mlflow_run=mlflow_run,
            key=key,
            max_results=None
            if max_results in (None, "")
            else mlflow_checks.check_int(max_results, what="max_results"),
            page_token=fields.get("page_token") or None,
        )
        body: dict[str, Any] = {"metrics": metrics}
        if next_token:
            body["next_page_token"] = next_token
        return Response(body)


# --- Everything else -------------------------------------------------------------------------


@csrf_exempt
def endpoint_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any other MLflow endpoint (artifacts, logged models, traces, registry, search): a
    JSON 404, so a client fails with a clear MlflowException rather than a parse error."""
    return JsonResponse(
        {
            "error_code": "ENDPOINT_NOT_FOUND",
            "message": f"Chronicle does not implement {request.method} {request.path}: it "
            "serves the MLflow tracking subset (experiments get-by-name, get, create; runs "
            "create, update, get, log-metric, log-parameter, set-tag, log-batch; metrics "
            "get-history).",
        },
        status=404,
    )
