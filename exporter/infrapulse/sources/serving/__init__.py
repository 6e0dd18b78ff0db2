"""LLM serving engines: scrape each endpoint's /metrics and map vLLM, SGLang, TensorRT-LLM
(Triton and trtllm-serve) and TGI onto one `infrapulse_llm_*` schema.

Imports: `..base` and the top-level plumbing only. The health score's latency windows
(`health.latency`) read what this source publishes; nothing here imports `health`.
"""
