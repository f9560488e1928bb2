"""The demo data set's tables as `load_demo` left them, kept in the test process and put
back after a transactional test emptied them (tests/conftest.py, the demo_data fixture):
copying the rows back takes under a second, loading the demo again half a minute."""

from __future__ import annotations


def _tables() -> list[str]:
    """The tables (partitions, not their parents) a demo snapshot copies: every one of the
    test database's but the migration history, which nothing empties."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.oid::regclass::text FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            " AND c.relname <> 'django_migrations' ORDER BY 1"
        )
        return [name for (name,) in cursor.fetchall()]


def snapshot_take() -> list[tuple[str, bytes]]:
    """Every non-empty table's rows (COPY's binary format), as `load_demo` left them."""
    from django.db import connection

    snapshot = []
    with connection.cursor() as cursor:
        for table in _tables():
            cursor.execute(f"SELECT EXISTS (SELECT FROM {table})")
            if not cursor.fetchone()[0]:
                continue
            with cursor.copy(f"COPY {table} TO STDOUT (FORMAT binary)") as copy:
                snapshot.append((table, b"".join(bytes(chunk) for chunk in copy)))
    return snapshot


def snapshot_restore(snapshot: list[tuple[str, bytes]] | None) -> bool:
    """Put the demo's tables back as `load_demo` left them in this process: the tables
    emptied (the reference data seeded since with them: its ids are the load's) and the
    rows copied in with triggers and foreign-key checks off (session_replication_role:
    the rows are the very ones they checked and derived). False, and nothing changed,
    when there is no snapshot or it cannot be restored (a partition it names dropped
    since, say): then the demo is loaded again."""
    from django.contrib.contenttypes.models import ContentType
    from django.db import DatabaseError, connection, transaction

    if snapshot is None:
        return False
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(f"TRUNCATE {', '.join(t for t, _ in snapshot)} CASCADE")
            for table, data in snapshot:
                with cursor.copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy:
                    copy.write(data)
    except DatabaseError:
        return False
    # The flush's post_migrate made content types anew; the process may have cached those.
    ContentType.objects.clear_cache()
    return True
