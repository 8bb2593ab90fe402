"""`kveval ab`: from two server command lines to a verdict (cli/ab.py is the command).

options.py: the experiment's settings and their check; plan.py: the starts and runs it makes
(pure), and what DIR holds; state.py: DIR's record of the arguments, refused when changed;
steps.py: one server's start, runs and stop; serverlog.py: the KV pool a server's log tells;
speed.py: the `--speed` load. The supervisor itself is run/serve.py.
"""
