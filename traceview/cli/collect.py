"""``traceview collect``: fronts the collectors (which need torch: the ``collect`` extra).

Each collector is a subcommand that hands everything after its name to the collector's own
argparse parser, ``--help`` included, with ``prog`` set so its usage names the command typed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from .group import main

#: subcommand -> (module, one-line help)
COLLECTORS = {
    "attention": ("collectors.attention", "Profile causal attention: naive vs. the SDPA backends."),
    "mlp": ("collectors.mlp", "Profile a Linear-GELU-Linear block: fused bias, separate bias, autocast."),
}
_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@main.group()
def collect():
    """Profile attention (or MLP) variants and save their traces; needs torch.

    Everything after the collector's name goes to the collector:
    `traceview collect attention --help` lists its options.
    """


def _front(which: str, module_name: str, short: str):
    @collect.command(
        which,
        context_settings=_PASS_THROUGH,
        short_help=short,
        add_help_option=False,
        help=f"{short} Options: `traceview collect {which} --help`.",
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args):
        wants_help = any(a in ("-h", "--help") for a in args)
        if not wants_help and importlib.util.find_spec("torch") is None:
            click.echo(
                "traceview: error: the collectors need torch: pip install torch "
                "(the CPU build: add --index-url https://download.pytorch.org/whl/cpu)",
                err=True,
            )
            sys.exit(1)
        module = importlib.import_module(module_name)
        sys.exit(module.main(list(args), prog=f"traceview collect {which}"))

    return command


for _which, (_module, _short) in COLLECTORS.items():
    _front(_which, _module, _short)
