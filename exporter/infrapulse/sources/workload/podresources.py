"""The kubelet pod-resources API v1 over its unix socket: which pod and container holds which
device (a GPU UUID or MIG UUID of nvidia.com/gpu, a PCI address of an SR-IOV/RDMA resource).

The stubs are generated from podresources_v1.proto on first use (grpc.protos_and_services runs
grpcio-tools in memory), as the published API defines it; `List` is the call (every kubelet with
the API has it); `Get` answers for one pod where the kubelet enables it (KubeletPodResourcesGet).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

PROTO = "infrapulse/sources/workload/podresources_v1.proto"
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"


@dataclass(frozen=True)
class DeviceGrant:
    """One container's share of one resource."""

    namespace: str
    pod: str
    container: str
    resource: str  # e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb, rdma/hca_shared, intel.com/sriov
    device_ids: tuple[str, ...]


@functools.cache
def stubs() -> tuple[Any, Any]:
    """(messages, services) modules generated from the .proto."""
    return grpc.protos_and_services(PROTO)


def grants_from(response: Any) -> list[DeviceGrant]:
    """The device grants in a ListPodResourcesResponse (or the pods of GetPodResourcesResponses)."""
    out = []
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if devices.device_ids:
                    out.append(DeviceGrant(pod.namespace, pod.name, container.name, devices.resource_name,
                                           tuple(devices.device_ids)))
    return out


async def list_grants(socket_path: str, timeout: float) -> list[DeviceGrant]:
    """Every pod's device grants (`List`). Raises grpc.aio.AioRpcError (UNAVAILABLE when no kubelet
    listens there) or TimeoutError."""
    messages, services = stubs()
    async with grpc.aio.insecure_channel(f"unix://{socket_path}") as channel:
        stub = services.PodResourcesListerStub(channel)
        response = await stub.List(messages.ListPodResourcesRequest(), timeout=timeout)
    return grants_from(response)
