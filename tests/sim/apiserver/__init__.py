"""A protocol-faithful simulated Kubernetes API server for tests (aiohttp, HTTPS on loopback).

Modules: server (SimApiServer and its test controls), routes (HTTP handling), watches (watch
streams), rest (generic storage semantics), store (objects, resourceVersion, history),
objects (defaulting, validation, the events.k8s.io view), scale (the Scale subresource),
discovery, tables (server-side Table output), selectors, sharding (KEP-5866 shardSelector),
patch, apply (server-side apply), workloads (controllers), deployments (the Deployment
controller), kubelet (pod lifecycle), access (auth, faults, partitions, request log), leases
(the Lease history), wire (JSON encoding), kubeconfig, clock, tls. Start one with
``tests.sim.kube.run_apiserver`` or the ``apiserver`` fixture.
"""

from .clock import ManualClock, SystemClock
from .kubelet import PodTiming
from .resources import PrinterColumn, ResourceType, ScaleSpec, argo_rollout_type, rollout_type
from .server import SimApiServer

__all__ = ["ManualClock", "PodTiming", "PrinterColumn", "ResourceType", "ScaleSpec",
           "SimApiServer", "SystemClock", "argo_rollout_type", "rollout_type"]
