from django.db import migrations

RUNS = """
CREATE TABLE task_runs (
  n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  label VARCHAR(64) NOT NULL,
  at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
)
"""


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []
    operations = [migrations.RunSQL(RUNS, "DROP TABLE task_runs")]
