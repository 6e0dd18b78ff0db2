"""`infrapulse doctor`: check-config plus a check of the host the config is meant for.

Owns: the checks (`files`: every file, directory and environment variable the config points at;
`probes`: one real collection per source — NVML loads, RDMA devices and their netdevs, ethtool
statistics, each gNMI target's Capabilities against its profile, each serving endpoint and its
engine), the result table and the `doctor` sub-command.

Imports: the top-level plumbing (`config`, `schema`, `store`, `scrape`, `webconfig`) and the
sources it probes (`sources`, through their public classes and helpers). Never `health`,
`daemon` or `simulate`: the CLI injects what a config may ask for (the NVML fake) as source options.
"""
