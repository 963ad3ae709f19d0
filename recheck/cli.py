"""The `recheck` command: a thin parser over the subcommands in recheck/commands/, one module each.

Each subcommand runs through recheck.commands.launch (settings, logging, errors as exit
codes: 0 ok, 1 failure, 2 bad configuration or usage, 3 not fresh). The benchmark tools
(`bench`, `soak`) live in the bench package of a source checkout, imported only when asked for:
they are never installed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from pathlib import Path

from recheck.commands import actions, changes, config, health, init_db, inspect, roles, run, seed, status
from recheck.commands.base import Command
from recheck.commands.launch import launch

DISTRIBUTION = "recheck-mysql"  # the import name is `recheck`; "recheck" on PyPI is another package
COMMANDS: dict[str, Command] = {
    command.name: command
    for module in (init_db, seed, roles, run, status, health, inspect, actions, changes, config)
    for command in module.COMMANDS
}
# Commands of the source checkout only: name -> (module whose main(argv) runs it, summary).
TOOLS = {
    "bench": ("bench.compare", "measure recheck beside the MySQL queue-table strategies"),
    "soak": ("bench.soak", "run like `run` for minutes and print memory as it goes"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recheck",
        description="Keep every row of a MySQL table freshly checked. "
        "Configuration comes from RECHECK_* environment variables and .env (see docs/configuration.md).",
    )
    parser.add_argument("--version", action="version", version=f"recheck {version()}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS.values():
        description = f"{command.summary[0].upper()}{command.summary[1:]}. Uses {command.uses}."
        sub = subcommands.add_parser(
            command.name, help=command.summary, description=description, epilog=command.epilog
        )
        command.arguments(sub)
    for name, (_, summary) in TOOLS.items():
        subcommands.add_parser(name, help=f"{summary} (source checkout only; `recheck {name} --help`)")
    return parser


def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in TOOLS:
        return run_tool(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    overrides = {}
    for option, setting in (("concurrency", "concurrency"), ("batch", "worker_batch")):
        if getattr(args, option, None) is not None:
            overrides[setting] = getattr(args, option)
    command = COMMANDS[args.command]
    return launch(args.command, lambda settings: command.run(settings, args), overrides)


def run_tool(name: str, argv: list[str]) -> int:
    """A source-checkout tool: its folder (bench/) sits beside recheck/ in the checkout, which an
    editable install runs from; an installed wheel has none."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "bench").is_dir() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    module_name = TOOLS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("bench"):
            raise
        print(
            f"recheck {name}: not installed here (a source checkout's tool, not in the wheel or the image)",
            file=sys.stderr,
        )
        return 2
    return module.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
