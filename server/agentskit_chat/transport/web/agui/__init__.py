"""The AG-UI front: `POST /agui/{definition_id}` runs an AG-UI 1.0 agent run as one turn,
its input checked here, its events mapped here from the turn stream."""

from ._front import AguiFront

__all__ = ["AguiFront"]
