"""The end of every entry a worker takes: the fenced write-back (writeback), its
acknowledgement or give-back (completer), and the deployment-wide write slots (writeslots)."""
