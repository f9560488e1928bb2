-- The canonical source of telemetry_metricseries_points_check, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_metricseries_points_check()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    kept bigint;
BEGIN
    SELECT o.id INTO kept
    FROM old_series o
    WHERE EXISTS (SELECT 1 FROM telemetry_metricpoint p WHERE p.series_id = o.id)
    LIMIT 1;
    IF kept IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation',
            MESSAGE = format('telemetry_metricseries: series %s still has points in '
                             'telemetry_metricpoint', kept);
    END IF;
    RETURN NULL;
END $function$
