"""The ``grownup`` command line."""
