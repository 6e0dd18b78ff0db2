"""GPU telemetry: NVML (a poller and an XID event watcher behind the `NvmlApi` Protocol) and
dcgm-exporter ingestion. Both export the same families (`families.py`), and an ownership rule
there keeps a series from being exported by both.

Imports: `..base` and the top-level plumbing only. The NVML fake used by the demo and tests is
injected through `SourceContext.options`, never imported from here.
"""
