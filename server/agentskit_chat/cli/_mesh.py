"""`serve` settings for running as one of several replicas behind a balancer or a mesh:
connection keepalive and maximum age, the delay between NOT_SERVING and refusing turns on
SIGTERM, and where the shared digest key comes from."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agentskit_chat.transport import ConnectionLifetime

from ._keys import DIGEST_KEY_FILE_ENV, configured_key, refuse_generated_key

DRAIN_DELAY_ENV: Final = "AGENTSKIT_CHAT_DRAIN_DELAY"
DEFAULT_DRAIN_DELAY: Final = 5.0


def add_mesh_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for keepalive, connection age, the drain delay and the digest key file."""
    lifetime = ConnectionLifetime()
    group = parser.add_argument_group("replicas and meshes")
    group.add_argument(
        "--keepalive-time",
        type=float,
        default=lifetime.keepalive_seconds,
        metavar="S",
        help="seconds without activity before the server pings a connection [%(default)s]",
    )
    group.add_argument(
        "--keepalive-timeout",
        type=float,
        default=lifetime.keepalive_timeout_seconds,
        metavar="S",
        help="seconds a ping may go unanswered before the connection closes [%(default)s]",
    )
    group.add_argument(
        "--max-connection-age",
        type=float,
        default=lifetime.max_age_seconds,
        metavar="S",
        help="seconds after which a connection is asked to go away, so clients reconnect "
        "and spread over replicas; 0 never [%(default)s]",
    )
    group.add_argument(
        "--max-connection-age-grace",
        type=float,
        default=lifetime.max_age_grace_seconds,
        metavar="S",
        help="seconds calls on such a connection get to finish [%(default)s]",
    )
    group.add_argument(
        "--drain-delay",
        type=float,
        default=float(os.environ.get(DRAIN_DELAY_ENV) or DEFAULT_DRAIN_DELAY),
        metavar="S",
        help="after SIGTERM, seconds health reports NOT_SERVING while new turns are still "
        "served, before they are refused and turns in flight drain; SIGINT skips it "
        "[%(default)s]",
    )
    key_file = os.environ.get(DIGEST_KEY_FILE_ENV)
    group.add_argument(
        "--digest-key-file",
        type=Path,
        default=Path(key_file) if key_file else None,
        metavar="FILE",
        help="hex digest key shared by every replica (a mounted secret) [digest.key in the "
        "state directory, created when missing]",
    )


@dataclass(frozen=True, slots=True)
class MeshSettings:
    """Resolved replica settings of one `serve` run."""

    lifetime: ConnectionLifetime = field(default_factory=ConnectionLifetime)
    drain_delay: float = 0.0
    """Seconds between NOT_SERVING and refusing new turns, after SIGTERM."""
    digest_key: bytes | None = field(default=None, repr=False)
    """The configured key; None to use (or create) the state directory's key file."""


def mesh_from(args: argparse.Namespace, store_url: str) -> MeshSettings:
    """Mesh settings from parsed flags; ValueError when they are unusable, or when a store
    shared by replicas would get a key generated on this host."""
    if args.drain_delay < 0:
        raise ValueError("--drain-delay must not be negative")
    key = configured_key(args.digest_key_file)
    refuse_generated_key(store_url, key)
    return MeshSettings(
        lifetime=ConnectionLifetime(
            keepalive_seconds=args.keepalive_time,
            keepalive_timeout_seconds=args.keepalive_timeout,
            max_age_seconds=args.max_connection_age,
            max_age_grace_seconds=args.max_connection_age_grace,
        ),
        drain_delay=args.drain_delay,
        digest_key=key,
    )
