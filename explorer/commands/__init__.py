"""One module per family of `tracegraph` commands; `cli.py` imports a command's module only
when it runs, so each command loads only what it uses."""
