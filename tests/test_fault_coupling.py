"""The simulated engines follow faults on their node (simulate/fault_coupling.py): a network fault
on the node's ports slows decode and prefill with arrivals flat, a fault on another node changes
nothing, a lost GPU takes its rank away, and the engines come back to baseline afterwards."""

from __future__ import annotations

import math
import re

import pytest

from infrapulse.health.latency import histogram_quantile
from infrapulse.simulate.demo import DEMO_NODES
from infrapulse.simulate.fault_coupling import NETWORK_EFFECTS, Slowdown, gpu_lost, network_slowdown
from infrapulse.simulate.gnmi_target import SimFabric
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.simulate.serving_engines import DEMO_ENGINES, EngineServer, demo_engine_gpus

NODE, OTHER = DEMO_NODES[0], DEMO_NODES[1]
ITL, TTFT = "vllm:inter_token_latency_seconds", "vllm:time_to_first_token_seconds"
SAMPLE = re.compile(r'^([^{\s]+)(?:\{(.*)\})? (\S+)$')


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def scrape(server: EngineServer, engine: str | None = None) -> dict[str, float]:
    """The engine's exposition as {name or name|le: value}, summed over data-parallel ranks (or
    one rank's only, by its `engine` label)."""
    server.advance()
    out: dict[str, float] = {}
    for line in server.render().splitlines():
        m = SAMPLE.match(line)
        if not m or line.startswith("#"):
            continue
        name, labels, value = m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), m.group(3)
        if engine is not None and labels.get("engine", engine) != engine:
            continue
        key = f"{name}|{labels['le']}" if "le" in labels else name
        out[key] = out.get(key, 0.0) + float(value)
    return out


def delta(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b[k] - a.get(k, 0.0) for k in b}


def mean(d: dict[str, float], family: str) -> float:
    return d[family + "_sum"] / d[family + "_count"]


def p95(d: dict[str, float], family: str) -> float:
    buckets = sorted((float(k.split("|")[1].replace("+Inf", "inf")), v) for k, v in d.items()
                     if k.startswith(family + "_bucket|"))
    q = histogram_quantile(0.95, buckets)
    assert q is not None
    return q


def window(server: EngineServer, clock: Clock, seconds: float, engine: str | None = None,
           step: float = 15.0) -> tuple[dict[str, float], float]:
    """Advance `seconds`, scraping every `step` as Prometheus would; the increase over the window
    and the most requests seen waiting at a scrape."""
    start, waiting = scrape(server, engine), 0.0
    end = clock.t + seconds
    while clock.t < end:
        clock.t = min(end, clock.t + step)
        now = scrape(server, engine)
        waiting = max(waiting, now["vllm:num_requests_waiting"])
    return delta(start, now), waiting


def engine(board: ScenarioBoard, clock: Clock, node: str = NODE, **kwargs) -> EngineServer:
    kwargs.setdefault("arrival_rate", 1.0)
    return EngineServer("vllm", seed=11, scenarios=board, dp_ranks=2, clock=clock, node=node, **kwargs)


def test_a_pfc_storm_on_the_node_slows_decode_and_prefill_with_arrivals_flat():
    clock = Clock()
    board = ScenarioBoard(clock=clock)
    board.place("pfc-storm", NODE, "ens1f0np0")
    server = engine(board, clock)
    clock.t = 60.0  # warm up: a steady batch
    healthy, _ = window(server, clock, 900)

    board.activate("pfc-storm")
    clock.t += 20.0  # the storm's ramp (0.3 -> 1 over 14 s) has reached its peak
    assert network_slowdown(board, NODE) == NETWORK_EFFECTS["pfc-storm"].peak
    storm, waiting = window(server, clock, 900)

    board.deactivate("pfc-storm")
    clock.t += 30.0  # the batch drains back to its healthy size
    after, _ = window(server, clock, 900)

    # Low load: the batch barely grows, so ITL moves by the fault's factor (x2.4) plus the little
    # a fuller batch adds; prefill x3 moves TTFT x2-4 (the transfer and the tick are unchanged).
    itl_ratio = mean(storm, ITL) / mean(healthy, ITL)
    ttft_ratio = mean(storm, TTFT) / mean(healthy, TTFT)
    assert 2.4 <= itl_ratio <= 2.4 * 1.3, itl_ratio
    assert 2.0 <= ttft_ratio <= 4.0, ttft_ratio
    # Arrivals flat: the same prompt tokens and requests per second; the queue stays short.
    tokens_ratio = storm["vllm:prompt_tokens_total"] / healthy["vllm:prompt_tokens_total"]
    requests_ratio = storm[TTFT + "_count"] / healthy[TTFT + "_count"]
    assert 0.85 <= tokens_ratio <= 1.15, tokens_ratio
    assert 0.9 <= requests_ratio <= 1.1, requests_ratio
    assert waiting < 5
    # Scenario off: back to the healthy latencies.
    assert mean(after, ITL) / mean(healthy, ITL) == pytest.approx(1.0, abs=0.1)
    assert mean(after, TTFT) / mean(healthy, TTFT) == pytest.approx(1.0, abs=0.15)


def test_the_slowdown_follows_the_faults_ramp():
    clock = Clock()
    board = ScenarioBoard(clock=clock)
    board.place("pfc-storm", NODE, "ens1f0np0")
    board.activate("pfc-storm")
    start = network_slowdown(board, NODE)
    assert start == Slowdown(itl=pytest.approx(1 + 1.4 * 0.3), prefill=pytest.approx(1 + 2.0 * 0.3))
    clock.t = 7.0
    assert network_slowdown(board, NODE).itl == pytest.approx(1 + 1.4 * 0.65)
    clock.t = 30.0
    assert network_slowdown(board, NODE) == Slowdown(2.4, 3.0)
    board.deactivate("pfc-storm")
    assert network_slowdown(board, NODE) == Slowdown()


def test_a_fault_on_another_node_leaves_the_engines_unchanged():
    clock = Clock()
    board, quiet = ScenarioBoard(clock=clock), ScenarioBoard(clock=clock)
    for name in NETWORK_EFFECTS:
        board.place(name, OTHER, "ens1f0np0")
        board.activate(name)
    board.place("xid", OTHER, "gpu3")
    board.activate("xid")
    struck = engine(board, clock, gpus=(3, 4))
    twin = engine(quiet, clock, gpus=(3, 4))
    assert network_slowdown(board, NODE) == Slowdown()
    assert not gpu_lost(board, NODE, 3)
    for t in (30.0, 200.0, 400.0):
        clock.t = t
        struck.advance()
        twin.advance()
        # the same seed, so byte for byte the same (but the wall-clock start time)
        assert _without_start(struck.render()) == _without_start(twin.render())


def _without_start(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("process_start_time_seconds")]


def test_ecn_and_retransmissions_slow_the_node_less_than_a_pause_storm():
    clock = Clock()
    board = ScenarioBoard(clock=clock)
    slowdowns = {}
    for name in NETWORK_EFFECTS:
        board.place(name, NODE, "ens1f0np0")
        board.activate(name)
        clock.t = 60.0
        slowdowns[name] = network_slowdown(board, NODE)
        board.deactivate(name)
        clock.t = 0.0
    assert slowdowns["pfc-storm"].itl > slowdowns["ecn-spike"].itl > slowdowns["rdma-retrans"].itl > 1.0
    assert slowdowns["pfc-storm"].prefill > slowdowns["ecn-spike"].prefill > slowdowns["rdma-retrans"].prefill


@pytest.mark.parametrize("fault", sorted(NETWORK_EFFECTS))
def test_the_demo_engines_slow_down_without_paging_the_serving_team(fault):
    """At the fault's peak every demo engine (its rate, ranks, batch) decodes slower, with a short
    queue (InfrapulseLlmQueueBuildingUp needs 5 waiting, more than running) and TTFT within the
    1 s SLI. ECN and retransmissions keep ITL p95 under its 0.05 s SLO, so the congestion
    signal, not a serving one, leads the health verdict; a pause storm or a flapping link may
    breach it, not its bad level (0.1 s)."""
    for name, variant, model, rate, ranks, batch in DEMO_ENGINES:
        clock = Clock()
        board = ScenarioBoard(clock=clock)
        board.place(fault, NODE, "ens1f0np0")
        server = EngineServer(variant, model=model, arrival_rate=rate, seed=5, scenarios=board,
                              dp_ranks=ranks, clock=clock, node=NODE, batch_limit=batch)
        ranks_models = server.ranks
        clock.t = 120.0
        server.advance()
        before_itl = sum(m.itl.sum for m in ranks_models) / sum(m.itl.count for m in ranks_models)
        board.activate(fault)
        clock.t = 150.0  # past every ramp
        server.advance()
        base = [(m.itl.sum, m.itl.count, list(m.itl.counts), m.ttft.count,
                 list(m.ttft.counts), m.prompt_tokens) for m in ranks_models]
        queue_alert, queue_ratio = 0, 0.0
        for t in range(151, 451):
            clock.t = float(t)
            server.advance()
            for m in ranks_models:  # each rank is a series of its own (vLLM's `engine` label)
                waiting, running = len(m.queue), len(m.running) + len(m.prefilling)
                queue_alert += waiting >= 5 and waiting > running
                queue_ratio = max(queue_ratio, waiting / max(running, 1))
        itl_sum = sum(m.itl.sum - b[0] for m, b in zip(ranks_models, base))
        itl_count = sum(m.itl.count - b[1] for m, b in zip(ranks_models, base))
        itl_buckets = [sum(m.itl.counts[i] - b[2][i] for m, b in zip(ranks_models, base))
                       for i in range(len(ranks_models[0].itl.counts))]
        ttft_buckets = [sum(m.ttft.counts[i] - b[4][i] for m, b in zip(ranks_models, base))
                        for i in range(len(ranks_models[0].ttft.counts))]
        prompt_rate = sum(m.prompt_tokens - b[5] for m, b in zip(ranks_models, base)) / 300
        itl_p95 = _quantile(ranks_models[0].itl.bounds, itl_buckets)
        ttft_p95 = _quantile(ranks_models[0].ttft.bounds, ttft_buckets)
        peak = NETWORK_EFFECTS[fault].peak.itl if fault != "link-flap" else 1.0 + (2.4 - 1.0) * 0.3
        assert itl_sum / itl_count >= peak * before_itl, (name, fault)
        assert queue_alert == 0 and queue_ratio < 0.5, (name, fault, queue_ratio)  # health's good level
        assert ttft_p95 < 1.0, (name, fault, ttft_p95)
        assert itl_p95 < (0.05 if fault in ("ecn-spike", "rdma-retrans") else 0.1), (name, fault, itl_p95)
        assert prompt_rate == pytest.approx(rate * 600, rel=0.2), (name, fault)  # the clients' rate


def _quantile(bounds: tuple[float, ...], counts: list[float]) -> float:
    cumulative, running = [], 0.0
    for bound, count in zip(bounds + (math.inf,), counts):
        running += count
        cumulative.append((bound, running))
    q = histogram_quantile(0.95, cumulative)
    assert q is not None
    return q


def test_a_lost_gpu_takes_its_rank_away_and_the_other_rank_serves_the_requests():
    clock = Clock()
    board = ScenarioBoard(clock=clock)
    board.place("xid", NODE, "gpu3")
    server = engine(board, clock, gpus=(3, 4), arrival_rate=2.0)
    clock.t = 60.0
    healthy, _ = window(server, clock, 600)
    board.activate("xid")
    rank0_at_loss = scrape(server, "0")
    struck, _ = window(server, clock, 600)
    rank0 = delta(rank0_at_loss, scrape(server, "0"))
    # Rank 0 (GPU 3) stopped: nothing running or waiting, no tokens; its requests were aborted.
    assert rank0_at_loss["vllm:num_requests_running"] == 0 and rank0_at_loss["vllm:num_requests_waiting"] == 0
    assert rank0_at_loss["vllm:kv_cache_usage_perc"] == 0.0
    assert rank0["vllm:generation_tokens_total"] == 0 and rank0["vllm:prompt_tokens_total"] == 0
    assert server.ranks[0].finished["abort"] > 0
    # The endpoint still takes every request: rank 1 serves them all.
    ratio = struck["vllm:prompt_tokens_total"] / healthy["vllm:prompt_tokens_total"]
    assert 0.85 <= ratio <= 1.15, ratio
    # The GPU is back: rank 0 serves its share again.
    board.deactivate("xid")
    back, _ = window(server, clock, 300, engine="0")
    assert back["vllm:generation_tokens_total"] > 0.3 * healthy["vllm:generation_tokens_total"] / 2


def test_the_demo_simulators_place_their_faults():
    board = ScenarioBoard()
    SimFabric.rails(DEMO_NODES, ("nvidia-cumulus", "sonic"), ports=16, scenarios=board)
    # leaf01's storm, ECN and flap ports face the first three nodes' first NIC
    assert board.sites("pfc-storm") == {(DEMO_NODES[0], "ens1f0np0")}
    assert board.sites("ecn-spike") == {(DEMO_NODES[1], "ens1f0np0")}
    assert board.sites("link-flap") == {(DEMO_NODES[2], "ens1f0np0")}
    # the vLLM ranks sit on the GPUs the dcgm-exporter attributes to their pods
    assert demo_engine_gpus("vllm-llama-70b", 2) == (3, 4)
    assert demo_engine_gpus("sglang-qwen", 1) == (1,)  # its pod holds GPU 1 (simulate/workloads.py)
