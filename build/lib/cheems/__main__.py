"""``python -m cheems`` = the ``cheems`` command."""

from cheems.cli.main import main

if __name__ == "__main__":  # a spawned worker process imports this module too
    main()
