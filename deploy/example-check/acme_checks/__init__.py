"""An example check package for recheck: what a team mounts or builds into the image."""
