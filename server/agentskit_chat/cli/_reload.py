"""Reloading a running server's definitions (SIGHUP) without resetting its sessions."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, CatalogChanges, ChatService

from ._definitions import gather

log = logging.getLogger("agentskit_chat.reload")


def reload_definitions(
    service: ChatService,
    directory: Path | None,
    modules: Sequence[str],
    adapters: AdapterRegistry,
) -> CatalogChanges | None:
    """Load the definitions again and serve them; None when refused (the old ones stay).

    Files are read again. Modules are not imported again: a module's chats change with a
    restart.
    """
    try:
        changes = service.replace_definitions(Catalog(gather(directory, modules, adapters)))
    except ConfigError as exc:
        log.error("reload refused, previous definitions keep serving:\n%s", exc)
        return None
    except ValueError as exc:
        log.error("reload refused, previous definitions keep serving: %s", exc)
        return None
    log.warning("definitions reloaded: %s", changes)
    return changes
