"""Whether an `ab` experiment teacher-forces: `off` never; `on` on every server, the
baseline's own too (refused with one line where the first server cannot); `auto` where the
first server's check finds a method that works, decided once and kept in `DIR/ab.json`, so a
resumed experiment forces as it began."""

from __future__ import annotations

from dataclasses import replace

import click

from kveval.errors import UsageError
from kveval.run import serve
from kveval.run.ab.options import AbOptions
from kveval.run.ab.plan import Folder
from kveval.run.ab.state import State, read_state, write_state


class Forcing:
    """Whether this experiment teacher-forces, asked of the first server that is up."""

    def __init__(self, opts: AbOptions, state: State, api_key: str | None) -> None:
        self.opts, self.state, self.api_key = opts, state, api_key
        if opts.teacher_force == "off":
            self.state = replace(state, forcing=False)

    def __call__(self, server: serve.Server) -> bool:
        if self.state.forcing is None:
            self.state = replace(self.state, forcing=self._probe(server))
            write_state(Folder(self.opts.output).state, self.state)
        return bool(self.state.forcing)

    def reload(self) -> None:
        """What the experiment decided meanwhile (another server's start, run side by side)."""
        found = read_state(Folder(self.opts.output).state)
        if found is not None and found.forcing is not None:
            self.state = replace(self.state, forcing=found.forcing)

    def stop(self, why: str) -> None:
        click.echo(f"note: not teacher-forcing: {why}", err=True)
        self.state = replace(self.state, forcing=False)
        write_state(Folder(self.opts.output).state, self.state)

    def _probe(self, server: serve.Server) -> bool:
        from kveval.run.check import forcing_method
        from kveval.run.endpoint import choose_model, probe

        info = probe(server.base_url, self.api_key)
        model = choose_model(self.opts.model, info.model_ids)
        method, why = forcing_method(server.base_url, model, self.api_key, info.fingerprint)
        if why is None:
            click.echo(f"kveval ab: teacher forcing by {method.name}", err=True)
            return True
        if self.opts.teacher_force == "on":
            raise UsageError(f"--teacher-force on: this server cannot teacher-force ({why})")
        click.echo(f"note: not teacher-forcing: {why}", err=True)
        return False
