"""The error type of autotile: every problem with user input raises :class:`Error`."""


class Error(Exception):
    """Bad input to autotile: the message names the node, op, tensor or shape at fault."""
