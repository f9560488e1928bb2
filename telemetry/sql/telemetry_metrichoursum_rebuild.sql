-- The canonical source of telemetry_metrichoursum_rebuild, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_metrichoursum_rebuild(ids bigint[])
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    written bigint;
BEGIN
    DELETE FROM telemetry_metrichoursum WHERE series_id = ANY(ids);
    INSERT INTO telemetry_metrichoursum (series_id, hour, point_count, finite_count, finite_sum)
    SELECT p.series_id, floor(date_part('epoch', p.wall_time) / 3600)::bigint, count(*),
        count(*) FILTER (WHERE p.value > '-Infinity'::float8 AND p.value < 'Infinity'::float8),
        coalesce(sum(p.value) FILTER (WHERE p.value > '-Infinity'::float8 AND p.value < 'Infinity'::float8), 0)
    FROM telemetry_metricpoint p
    WHERE p.wall_time IS NOT NULL AND p.series_id IN (
        SELECT s.id FROM telemetry_metricseries s
        WHERE s.id = ANY(ids) AND s.name IN ('tokens_per_s', 'step_time_s', 'mfu'))
    GROUP BY 1, 2
    ORDER BY 1, 2;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $function$
