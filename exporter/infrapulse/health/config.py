"""Config schema of the `health:` section."""

from ..schema import Section

CONFIG = Section(doc="Health score settings.", fields={})
