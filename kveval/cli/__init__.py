"""The command line: thin click commands; errors become exit codes here."""
