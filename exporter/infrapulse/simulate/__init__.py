"""Simulators that make the whole stack run, and misbehave on demand, on a laptop."""
