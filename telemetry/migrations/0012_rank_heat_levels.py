"""Heat-map rows kept with every rank bucket (each group of ranks' slowest mean and rank), and
coarse buckets (1 h and 6 h) made from the existing fine ones, so long windows read a few
hundred small rows instead of thousands of 16,384-long arrays."""

import django.contrib.postgres.fields
from django.conf import settings
from django.db import migrations, models

import telemetry.models
from telemetry import rank_heat

COARSE_BUCKETS_S = (3600, 6 * 3600)  # as telemetry.rank_timings.COARSE_BUCKETS_S was here

COARSE_FROM_FINER = """
INSERT INTO telemetry_rankbucket (attempt_id, section, bucket_s, bucket_start, ranks, means_s,
    medians_s, counts, group_ranks, group_slowest_s, group_slowest_rank)
SELECT attempt_id, section, %(width)s, start, array_agg(r ORDER BY r),
    array_agg(m ORDER BY r)::real[], array_agg(d ORDER BY r)::real[], array_agg(n ORDER BY r),
    1, '{}', '{}'
FROM (
    SELECT attempt_id, section,
        to_timestamp(floor(extract(epoch FROM bucket_start) / %(width)s) * %(width)s) AS start,
        u.r, sum(u.m * u.n) / sum(u.n) AS m, sum(u.d * u.n) / sum(u.n) AS d,
        sum(u.n)::integer AS n
    FROM telemetry_rankbucket, unnest(ranks, means_s, medians_s, counts) AS u(r, m, d, n)
    WHERE bucket_s = %(finer)s AND u.n > 0
    GROUP BY 1, 2, 3, 4
) per_rank
GROUP BY attempt_id, section, start
ON CONFLICT DO NOTHING
"""


def backfill(apps, schema_editor):
    fine = settings.RANK_BUCKET_S
    levels = [fine, *(w for w in COARSE_BUCKETS_S if w > fine and w % fine == 0)]
    with schema_editor.connection.cursor() as cursor:
        for finer, width in zip(levels, levels[1:], strict=False):
            cursor.execute(COARSE_FROM_FINER, {"width": width, "finer": finer})
    RankBucket = apps.get_model("telemetry", "RankBucket")
    for bucket in RankBucket.objects.all().iterator(chunk_size=50):
        if not bucket.ranks:
            continue
        group = rank_heat.group_ranks_for(max(bucket.ranks) + 1)
        slowest_s, slowest_rank = rank_heat.slowest_per_group(bucket.ranks, bucket.means_s, group)
        RankBucket.objects.filter(
            attempt_id=bucket.attempt_id,
            section=bucket.section,
            bucket_s=bucket.bucket_s,
            bucket_start=bucket.bucket_start,
        ).update(group_ranks=group, group_slowest_s=slowest_s, group_slowest_rank=slowest_rank)


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0011_run_tags"),
    ]

    operations = [
        migrations.AddField(
            model_name="rankbucket",
            name="group_ranks",
            field=models.IntegerField(default=1),
        ),
        migrations.AddField(
            model_name="rankbucket",
            name="group_slowest_rank",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(null=True), default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="rankbucket",
            name="group_slowest_s",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=telemetry.models.RealField(null=True), default=list, size=None
            ),
        ),
        migrations.AddConstraint(
            model_name="rankbucket",
            constraint=models.CheckConstraint(
                condition=models.Q(("group_ranks__gt", 0)), name="rank_bucket_group_positive"
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
