"""``traceview collect``: fronts the collectors (which need torch: the ``collect`` extra)."""
from __future__ import annotations

import importlib.util
import sys

import click

from . import main

COLLECTORS = {"attention": "collectors.attention", "mlp": "collectors.mlp"}


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                "help_option_names": []})
@click.argument("which", type=click.Choice(sorted(COLLECTORS)))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def collect(which, args):
    """Profile attention (or MLP) variants and save their traces; needs torch.

    Everything after WHICH goes to the collector: `traceview collect attention --help`.
    """
    if importlib.util.find_spec("torch") is None:
        click.echo("traceview: error: the collectors need torch: pip install 'traceview[collect]'", err=True)
        sys.exit(1)
    module = importlib.import_module(COLLECTORS[which])
    sys.exit(module.main(list(args)))
