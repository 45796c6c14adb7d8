"""rote: an executable replication of "Reason to Rote: Rethinking Memorization in Reasoning"."""

from .config import ConfigError, RunConfig, make_config

__all__ = ["ConfigError", "RunConfig", "make_config"]
__version__ = "0.1.0"
