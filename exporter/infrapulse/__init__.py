"""infrapulse: one exporter for RDMA fabric, switch, GPU and LLM-serving telemetry."""

__version__ = "0.2.0"
