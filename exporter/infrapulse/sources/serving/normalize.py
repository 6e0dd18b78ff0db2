"""Transitional: the normaliser moved to `.extract` (history follows it); the next commit splits it
into `.families`, `.extract` and this module."""

from . import extract as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
