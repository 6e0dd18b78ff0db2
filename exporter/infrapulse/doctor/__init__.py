"""`infrapulse doctor`: check-config plus a check of the host the config is meant for.

Owns: the checks (`files`: every file, directory and environment variable the config points at;
`probes`: one real collection per source — NVML loads, RDMA devices and their netdevs, ethtool
statistics, each gNMI target's Capabilities and one Get per mapping against its profile (`fit`),
each serving endpoint and its engine), the result table, the fix of each problem (`vocabulary`,
shared with the quickstarts' tables) and the `doctor` sub-command.

Imports: the top-level plumbing (`config`, `schema`, `store`, `scrape`, `webconfig`) and the
sources it probes (`sources`, through their public classes and helpers). Never `health`,
`daemon` or `simulate`: the CLI injects what a config may ask for (the NVML fake) as source options.
"""
