from django.db import migrations, models

import recheck.django.table as table


class Migration(migrations.Migration):
    """The enqueuing request's trace context, stored with each task (docs/tracing.md)."""

    dependencies = [("recheck_tasks", "0001_initial")]

    operations = [
        migrations.AddField(  # the unmanaged model's state; the column is the SQL's below
            model_name="rechecktask",
            name="traceparent",
            field=models.CharField(max_length=55, null=True),
        ),
        migrations.RunSQL(table.ADD_TRACEPARENT, table.DROP_TRACEPARENT),
    ]
