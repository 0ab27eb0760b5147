"""``python -m cheems`` = the ``cheems`` command."""

from cheems.cli.main import main

main()
