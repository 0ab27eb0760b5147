"""The ``cheems`` command line."""
