from django.db import migrations, models

import recheck.django.table as table


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []

    operations = [
        migrations.CreateModel(
            name="RecheckTask",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("task_path", models.CharField(max_length=255)),
                ("args_kwargs", models.TextField()),
                ("priority", models.SmallIntegerField(default=0)),
                ("urgent", models.SmallIntegerField(default=0)),
                ("queue_name", models.CharField(max_length=32)),
                ("backend_name", models.CharField(max_length=32)),
                ("enqueued_at", models.DateTimeField()),
                ("run_after", models.DateTimeField(null=True)),
                ("result", models.TextField(null=True)),
                ("checked_at", models.DateTimeField(null=True)),
                ("next_check_at", models.DateTimeField(null=True)),
                ("check_count", models.PositiveIntegerField(default=0)),
                ("fail_count", models.PositiveIntegerField(default=0)),
                ("last_error", models.TextField(null=True)),
            ],
            options={"managed": False, "db_table": table.TABLE, "verbose_name": "task", "ordering": ("-id",)},
        ),
        migrations.RunSQL(table.CREATE_TABLE, table.DROP_TABLE),
    ]
