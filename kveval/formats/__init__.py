"""Files: the run file and the formats read as runs."""
