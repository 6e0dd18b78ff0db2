"""Simulators that make the whole stack run, and misbehave on demand, on a laptop.

Owns: the demo (`demo`, `infrapulse demo` and `infrapulse simulate ...`), one simulator per
data source (a sysfs tree and NIC stats files, gNMI switches, the NVML fake and a fake
dcgm-exporter, serving engines), the shared scenario board and test PKI. Each sends what the
real captures show (shared/real), never an older or invented shape.

Imports: anything in the package (it wires the daemon to its simulators). Only the CLI's demo
wiring imports simulate (tests/test_imports.py keeps that list).
"""
