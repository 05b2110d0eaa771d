"""One module per `tracegraph` command, named after it and listed in `cli.COMMANDS`: its
`add_parser(sub)` defines the command's arguments and sets its handler, `handle(args)`.

Parsing imports every command's module (`--help` lists them all), so a module imports at its
top only what parsing needs (argparse, `options`, `common`; types under TYPE_CHECKING), and its
handler imports the layers it drives (pyarrow, Kuzu, the builders, textual) when it runs.
Shared by several commands: `common.py` (the handlers' helpers) and `traces.py` (a database
from trace files; heavy, imported by handlers); shared options: `explorer/options.py`.
"""
