-- The canonical source of telemetry_metricpoint_added, as pg_get_functiondef prints it after migrate.
-- Change it here and in a new migration holding this text (docs/hot-paths.md, "Triggers").
CREATE OR REPLACE FUNCTION public.telemetry_metricpoint_added()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids bigint[];
    found bigint;
    missing bigint;
    touched bigint;
BEGIN
    SELECT array_agg(DISTINCT series_id) INTO ids FROM new_points;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- The series check (0019): lock the series as the foreign key did, fail on a missing one.
    SELECT count(*) INTO found FROM (
        SELECT 1 FROM telemetry_metricseries WHERE id = ANY(ids) ORDER BY id FOR KEY SHARE
    ) s;
    IF found < cardinality(ids) THEN
        SELECT i INTO missing FROM unnest(ids) i
        WHERE NOT EXISTS (SELECT 1 FROM telemetry_metricseries s WHERE s.id = i)
        LIMIT 1;
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation',
            MESSAGE = format('telemetry_metricpoint: series %s is not present in '
                             'telemetry_metricseries', missing);
    END IF;
    -- The rollups (0005).
    INSERT INTO telemetry_metricrollup AS r (series_id, width, bucket, point_count, first_step, last_step, finite_count, finite_sum, min_value, min_step, min_time, max_value, max_step, max_time, nonfinite_value, nonfinite_step, nonfinite_time)
    WITH l0 AS (SELECT series_id, step / 16 AS bucket, count(*) AS n, min(step) AS first_step, max(step) AS last_step, count(*) FILTER (WHERE finite) AS finite_count, coalesce(sum(value) FILTER (WHERE finite), 0) AS finite_sum, min(ARRAY[value, hi, lo, t]) FILTER (WHERE finite) AS lo, max(ARRAY[value, -hi, -lo, t]) FILTER (WHERE finite) AS hi, min(ARRAY[hi, lo, value, t]) FILTER (WHERE NOT finite) AS bad FROM (SELECT series_id, step, value, date_part('epoch', wall_time) AS t, value NOT IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8) AS finite, (step / 2147483648)::float8 AS hi, (step % 2147483648)::float8 AS lo FROM new_points) p GROUP BY 1, 2), l1 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l0 GROUP BY 1, 2), l2 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l1 GROUP BY 1, 2), l3 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l2 GROUP BY 1, 2), l4 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l3 GROUP BY 1, 2), l5 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l4 GROUP BY 1, 2), l6 AS (SELECT series_id, bucket / 4 AS bucket, sum(n)::bigint AS n, min(first_step) AS first_step, max(last_step) AS last_step, sum(finite_count)::bigint AS finite_count, sum(finite_sum) AS finite_sum, min(lo) AS lo, max(hi) AS hi, min(bad) AS bad FROM l5 GROUP BY 1, 2) SELECT series_id, width, bucket, n, first_step, last_step, finite_count, finite_sum, lo[1], ((lo[2])::bigint * 2147483648 + (lo[3])::bigint), to_timestamp(lo[4]), hi[1], ((-hi[2])::bigint * 2147483648 + (-hi[3])::bigint), to_timestamp(hi[4]), bad[3], ((bad[1])::bigint * 2147483648 + (bad[2])::bigint), to_timestamp(bad[4]) FROM (SELECT 16 AS width, * FROM l0 UNION ALL SELECT 64 AS width, * FROM l1 UNION ALL SELECT 256 AS width, * FROM l2 UNION ALL SELECT 1024 AS width, * FROM l3 UNION ALL SELECT 4096 AS width, * FROM l4 UNION ALL SELECT 16384 AS width, * FROM l5 UNION ALL SELECT 65536 AS width, * FROM l6) a ORDER BY series_id, width, bucket
    ON CONFLICT (series_id, width, bucket) DO UPDATE SET point_count = r.point_count + EXCLUDED.point_count, first_step = LEAST(r.first_step, EXCLUDED.first_step), last_step = GREATEST(r.last_step, EXCLUDED.last_step), finite_count = r.finite_count + EXCLUDED.finite_count, finite_sum = r.finite_sum + EXCLUDED.finite_sum, min_value = CASE WHEN EXCLUDED.min_step IS NOT NULL AND (r.min_step IS NULL OR EXCLUDED.min_value < r.min_value OR (EXCLUDED.min_value = r.min_value AND EXCLUDED.min_step < r.min_step)) THEN EXCLUDED.min_value ELSE r.min_value END, min_step = CASE WHEN EXCLUDED.min_step IS NOT NULL AND (r.min_step IS NULL OR EXCLUDED.min_value < r.min_value OR (EXCLUDED.min_value = r.min_value AND EXCLUDED.min_step < r.min_step)) THEN EXCLUDED.min_step ELSE r.min_step END, min_time = CASE WHEN EXCLUDED.min_step IS NOT NULL AND (r.min_step IS NULL OR EXCLUDED.min_value < r.min_value OR (EXCLUDED.min_value = r.min_value AND EXCLUDED.min_step < r.min_step)) THEN EXCLUDED.min_time ELSE r.min_time END, max_value = CASE WHEN EXCLUDED.max_step IS NOT NULL AND (r.max_step IS NULL OR EXCLUDED.max_value > r.max_value OR (EXCLUDED.max_value = r.max_value AND EXCLUDED.max_step < r.max_step)) THEN EXCLUDED.max_value ELSE r.max_value END, max_step = CASE WHEN EXCLUDED.max_step IS NOT NULL AND (r.max_step IS NULL OR EXCLUDED.max_value > r.max_value OR (EXCLUDED.max_value = r.max_value AND EXCLUDED.max_step < r.max_step)) THEN EXCLUDED.max_step ELSE r.max_step END, max_time = CASE WHEN EXCLUDED.max_step IS NOT NULL AND (r.max_step IS NULL OR EXCLUDED.max_value > r.max_value OR (EXCLUDED.max_value = r.max_value AND EXCLUDED.max_step < r.max_step)) THEN EXCLUDED.max_time ELSE r.max_time END, nonfinite_value = CASE WHEN EXCLUDED.nonfinite_step IS NOT NULL AND (r.nonfinite_step IS NULL OR EXCLUDED.nonfinite_step < r.nonfinite_step) THEN EXCLUDED.nonfinite_value ELSE r.nonfinite_value END, nonfinite_step = CASE WHEN EXCLUDED.nonfinite_step IS NOT NULL AND (r.nonfinite_step IS NULL OR EXCLUDED.nonfinite_step < r.nonfinite_step) THEN EXCLUDED.nonfinite_step ELSE r.nonfinite_step END, nonfinite_time = CASE WHEN EXCLUDED.nonfinite_step IS NOT NULL AND (r.nonfinite_step IS NULL OR EXCLUDED.nonfinite_step < r.nonfinite_step) THEN EXCLUDED.nonfinite_time ELSE r.nonfinite_time END;
    -- The hour sums (0026): the throughput series' points with a wall time, per UTC hour.
    INSERT INTO telemetry_metrichoursum AS h (series_id, hour, point_count, finite_count, finite_sum)
    SELECT p.series_id, floor(date_part('epoch', p.wall_time) / 3600)::bigint, count(*),
        count(*) FILTER (WHERE p.value > '-Infinity'::float8 AND p.value < 'Infinity'::float8),
        coalesce(sum(p.value) FILTER (WHERE p.value > '-Infinity'::float8 AND p.value < 'Infinity'::float8), 0)
    FROM new_points p
    WHERE p.wall_time IS NOT NULL AND p.series_id IN (
        SELECT s.id FROM telemetry_metricseries s
        WHERE s.id = ANY(ids) AND s.name IN ('tokens_per_s', 'step_time_s', 'mfu'))
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (series_id, hour) DO UPDATE SET point_count = h.point_count + EXCLUDED.point_count, finite_count = h.finite_count + EXCLUDED.finite_count, finite_sum = h.finite_sum + EXCLUDED.finite_sum;
    -- The throughput sums (0016).
    INSERT INTO telemetry_throughputsum AS t (attempt_id, reported_points, timed_points, both_points, first_step, last_step, reported_finite_count, reported_finite_sum, timed_finite_count, timed_positive_count, timed_positive_sum_s, paired_weighted_sum, paired_weight_s)
    SELECT DISTINCT s.attempt_id, 0, 0, 0, NULL::bigint, NULL::bigint, 0, 0.0, 0, 0, 0.0, 0.0, 0.0
    FROM unnest(ids) d(series_id)
    JOIN telemetry_metricseries s ON s.id = d.series_id AND s.name IN ('tokens_per_s', 'step_time_s')
    ORDER BY 1
    ON CONFLICT (attempt_id) DO UPDATE SET reported_points = t.reported_points;
    GET DIAGNOSTICS touched = ROW_COUNT;
    IF touched = 0 THEN
        RETURN NULL;
    END IF;
    WITH ns AS (
    SELECT s.id, s.attempt_id, s.name = 'tokens_per_s' AS is_reported, os.id AS other_id
    FROM unnest(ids) d(series_id)
    JOIN telemetry_metricseries s ON s.id = d.series_id AND s.name IN ('tokens_per_s', 'step_time_s')
    LEFT JOIN telemetry_metricseries os ON os.run_id = s.run_id
        AND os.attempt_id = s.attempt_id
        AND os.name = CASE WHEN s.name = 'tokens_per_s' THEN 'step_time_s' ELSE 'tokens_per_s' END
), n AS (
    SELECT ns.attempt_id, ns.is_reported, p.step,
        CASE WHEN ns.is_reported THEN p.value ELSE o.value END AS reported,
        CASE WHEN ns.is_reported THEN o.value ELSE p.value END AS timed,
        o.step IS NOT NULL AND (NOT ns.is_reported OR q.step IS NULL) AS counted
    FROM new_points p JOIN ns ON ns.id = p.series_id
    LEFT JOIN telemetry_metricpoint o ON o.series_id = ns.other_id AND o.step = p.step
    LEFT JOIN new_points q ON q.series_id = ns.other_id AND q.step = p.step
)
    UPDATE telemetry_throughputsum AS t SET reported_points = t.reported_points + a.reported_points, timed_points = t.timed_points + a.timed_points, both_points = t.both_points + a.both_points, first_step = LEAST(t.first_step, a.first_step), last_step = GREATEST(t.last_step, a.last_step), reported_finite_count = t.reported_finite_count + a.reported_finite_count, reported_finite_sum = t.reported_finite_sum + a.reported_finite_sum, timed_finite_count = t.timed_finite_count + a.timed_finite_count, timed_positive_count = t.timed_positive_count + a.timed_positive_count, timed_positive_sum_s = t.timed_positive_sum_s + a.timed_positive_sum_s, paired_weighted_sum = t.paired_weighted_sum + a.paired_weighted_sum, paired_weight_s = t.paired_weight_s + a.paired_weight_s
    FROM (SELECT attempt_id, count(*) FILTER (WHERE is_reported) AS reported_points, count(*) FILTER (WHERE NOT is_reported) AS timed_points, count(*) FILTER (WHERE counted) AS both_points, min(step) AS first_step, max(step) AS last_step, count(*) FILTER (WHERE is_reported AND (reported > '-Infinity'::float8 AND reported < 'Infinity'::float8)) AS reported_finite_count, coalesce(sum(reported) FILTER (WHERE is_reported AND (reported > '-Infinity'::float8 AND reported < 'Infinity'::float8)), 0) AS reported_finite_sum, count(*) FILTER (WHERE NOT is_reported AND (timed > '-Infinity'::float8 AND timed < 'Infinity'::float8)) AS timed_finite_count, count(*) FILTER (WHERE NOT is_reported AND (timed > 0 AND timed < 'Infinity'::float8)) AS timed_positive_count, coalesce(sum(timed) FILTER (WHERE NOT is_reported AND (timed > 0 AND timed < 'Infinity'::float8)), 0) AS timed_positive_sum_s, coalesce(sum(reported * timed) FILTER (WHERE counted AND (reported > '-Infinity'::float8 AND reported < 'Infinity'::float8) AND (timed > 0 AND timed < 'Infinity'::float8)), 0) AS paired_weighted_sum, coalesce(sum(timed) FILTER (WHERE counted AND (reported > '-Infinity'::float8 AND reported < 'Infinity'::float8) AND (timed > 0 AND timed < 'Infinity'::float8)), 0) AS paired_weight_s FROM n GROUP BY attempt_id) a
    WHERE t.attempt_id = a.attempt_id;
    RETURN NULL;
END $function$
