"""Course tooling: nbgrader configuration, notebook format, coverage map, self-check, demo."""
