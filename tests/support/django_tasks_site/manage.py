#!/usr/bin/env python
"""A Django project whose tasks run on recheck (tests/integration/test_django_tasks.py)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasksite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
