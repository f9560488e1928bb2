"""REDIS_URL in each client's spelling: TCP URLs pass through, a Unix socket's database
travels as `db` for redis-py and as `virtual_host` for Celery."""

from __future__ import annotations

import pytest

from config.redis_urls import celery_broker_url, redis_cache_url, redis_db, redis_url_with_db

SOCKET = "/srv/chronicle/var/redis/redis.sock"


@pytest.mark.parametrize(
    ("url", "db"),
    [
        ("redis://127.0.0.1:6379/15", 15),
        ("redis://127.0.0.1:6379", 0),
        (f"unix://{SOCKET}?db=3", 3),
        (f"redis+socket://{SOCKET}?db=4", 4),
        (f"redis+socket://{SOCKET}?virtual_host=5", 5),
        (f"unix://{SOCKET}", 0),
    ],
)
def test_the_database_a_url_names(url: str, db: int) -> None:
    assert redis_db(url) == db


def test_moving_to_another_database_keeps_the_spelling() -> None:
    assert redis_url_with_db("redis://127.0.0.1:6379/15", 14) == "redis://127.0.0.1:6379/14"
    assert redis_url_with_db(f"unix://{SOCKET}?db=15", 14) == f"unix://{SOCKET}?db=14"
    assert (
        redis_url_with_db(f"redis+socket://{SOCKET}?db=15", 13)
        == f"redis+socket://{SOCKET}?virtual_host=13"
    )


def test_each_client_gets_its_spelling() -> None:
    tcp = "redis://127.0.0.1:6379/15"
    assert redis_cache_url(tcp) == celery_broker_url(tcp) == tcp
    for url in (f"unix://{SOCKET}?db=2", f"redis+socket://{SOCKET}?db=2"):
        assert redis_cache_url(url) == f"unix://{SOCKET}?db=2"
        assert celery_broker_url(url) == f"redis+socket://{SOCKET}?virtual_host=2"
