-- The canonical source of telemetry_throughputsum_rebuild, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_throughputsum_rebuild(ids bigint[])
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    written bigint;
BEGIN
    DELETE FROM telemetry_throughputsum WHERE attempt_id = ANY(ids);
    INSERT INTO telemetry_throughputsum (attempt_id, reported_points, timed_points, both_points, first_step, last_step, reported_finite_count, reported_finite_sum, timed_finite_count, timed_positive_count, timed_positive_sum_s, paired_weighted_sum, paired_weight_s)
    SELECT m.attempt_id, count(*) FILTER (WHERE rs IS NOT NULL) AS reported_points, count(*) FILTER (WHERE ts IS NOT NULL) AS timed_points, count(*) FILTER (WHERE (rs IS NOT NULL AND ts IS NOT NULL)) AS both_points, min(step) AS first_step, max(step) AS last_step, count(*) FILTER (WHERE rs IS NOT NULL AND (rv > '-Infinity'::float8 AND rv < 'Infinity'::float8)) AS reported_finite_count, coalesce(sum(rv) FILTER (WHERE rs IS NOT NULL AND (rv > '-Infinity'::float8 AND rv < 'Infinity'::float8)), 0) AS reported_finite_sum, count(*) FILTER (WHERE ts IS NOT NULL AND (tv > '-Infinity'::float8 AND tv < 'Infinity'::float8)) AS timed_finite_count, count(*) FILTER (WHERE ts IS NOT NULL AND (tv > 0 AND tv < 'Infinity'::float8)) AS timed_positive_count, coalesce(sum(tv) FILTER (WHERE ts IS NOT NULL AND (tv > 0 AND tv < 'Infinity'::float8)), 0) AS timed_positive_sum_s, coalesce(sum(rv * tv) FILTER (WHERE (rs IS NOT NULL AND ts IS NOT NULL) AND (rv > '-Infinity'::float8 AND rv < 'Infinity'::float8) AND (tv > 0 AND tv < 'Infinity'::float8)), 0) AS paired_weighted_sum, coalesce(sum(tv) FILTER (WHERE (rs IS NOT NULL AND ts IS NOT NULL) AND (rv > '-Infinity'::float8 AND rv < 'Infinity'::float8) AND (tv > 0 AND tv < 'Infinity'::float8)), 0) AS paired_weight_s
    FROM (SELECT attempt_id, max(id) FILTER (WHERE name = 'tokens_per_s') AS reported_id,
                 max(id) FILTER (WHERE name = 'step_time_s') AS timed_id
          FROM telemetry_metricseries
          WHERE attempt_id = ANY(ids) AND name IN ('tokens_per_s', 'step_time_s')
          GROUP BY attempt_id) m
    CROSS JOIN LATERAL (
        SELECT step, r.step AS rs, t.step AS ts, r.value AS rv, t.value AS tv
        FROM (SELECT step, value FROM telemetry_metricpoint WHERE series_id = m.reported_id) r
        FULL JOIN (SELECT step, value FROM telemetry_metricpoint WHERE series_id = m.timed_id) t
        USING (step)
    ) j
    GROUP BY m.attempt_id
    ORDER BY m.attempt_id;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $function$
