-- The canonical source of telemetry_stepstartchunk_rebuild, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_stepstartchunk_rebuild(ids bigint[])
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    written bigint;
BEGIN
    DELETE FROM telemetry_stepstartchunk WHERE attempt_id = ANY(ids);
    INSERT INTO telemetry_stepstartchunk (attempt_id, bucket, steps, started_us)
    SELECT s.attempt_id, s.step / 4096, string_agg(int8send(s.step), '' ORDER BY s.step), string_agg(timestamptz_send(s.started_at), '' ORDER BY s.step)
    FROM telemetry_stepstart s WHERE s.attempt_id = ANY(ids)
    GROUP BY 1, 2 ORDER BY 1, 2;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $function$
