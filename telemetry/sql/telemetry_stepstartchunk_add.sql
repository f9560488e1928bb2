-- The canonical source of telemetry_stepstartchunk_add, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_stepstartchunk_add()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO telemetry_stepstartchunk AS c (attempt_id, bucket, steps, started_us)
    SELECT DISTINCT attempt_id, step / 4096, ''::bytea, ''::bytea FROM new_starts
    ORDER BY 1, 2
    ON CONFLICT (attempt_id, bucket) DO UPDATE SET steps = c.steps;
    UPDATE telemetry_stepstartchunk AS c SET steps = p.steps, started_us = p.started_us
    FROM (
        SELECT s.attempt_id, t.bucket, string_agg(int8send(s.step), '' ORDER BY s.step) AS steps, string_agg(timestamptz_send(s.started_at), '' ORDER BY s.step) AS started_us
        FROM (SELECT DISTINCT attempt_id, step / 4096 AS bucket FROM new_starts) t
        JOIN telemetry_stepstart s ON s.attempt_id = t.attempt_id
            AND s.step >= t.bucket * 4096 AND s.step <= t.bucket * 4096 + 4095
        GROUP BY 1, 2
    ) p
    WHERE c.attempt_id = p.attempt_id AND c.bucket = p.bucket;
    RETURN NULL;
END $function$
