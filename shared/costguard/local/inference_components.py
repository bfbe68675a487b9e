"""ListInferenceComponents for the local stack: moto implements no inference-component call, so the adapter
(aws/inference_components.py) is served from the world file's endpoints of kind ``inference_components``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from costguard.aws import clients, inference_components
from costguard.local.world import World


@contextlib.contextmanager
def world_inference_components(world: World) -> Iterator[None]:
    """Serve the adapter from the world: each place's endpoints and the components they host, all InService."""

    def in_service(region: str) -> dict[str, tuple[str, ...]]:
        account = clients.acting_account() or world.account
        if clients.is_member(account, region):
            clients.reach(account, region)  # the member role's credentials, as the real call would need them
        return {
            e.name: tuple(sorted(e.components()))
            for place in world.places()
            if place.region == region and place.account == account
            for e in place.endpoints
            if e.components()
        }

    with mock.patch.object(inference_components, "in_service", in_service):
        yield
