"""The version of the agent2env SDK."""

__version__ = "0.1.0"
