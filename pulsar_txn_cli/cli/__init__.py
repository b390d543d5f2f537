"""The command line: thin modules, one per command group, over the library."""
