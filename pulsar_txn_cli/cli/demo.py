"""Placeholder: registered by its owner as the command group is built."""


def register(app) -> None:
    pass
