"""Errors that groundrl reports to its users.

Every error a user can cause by what they pass in (a model that does not exist, a bad config
value, an unknown environment) is a :class:`GroundrlError`: its message is one line that says
what is wrong and how to fix it. The command line prints it and exits with code 2; anything else
that escapes is a bug and keeps its traceback.
"""


class GroundrlError(Exception):
    """A problem with the user's input, explained in one line."""


class InvalidArgumentError(GroundrlError, ValueError):
    """A value that is not one of the accepted ones (dtype, device, normalization, ...)."""


class ModelLoadError(GroundrlError, OSError):
    """A model that cannot be found, downloaded or read."""


class UnknownEnvironmentError(GroundrlError, KeyError):
    """An environment id that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])
