"""`python -m kveval.cli`: the same command line as the `kveval` script."""

from kveval.cli.cli import main

main()
