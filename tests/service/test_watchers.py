"""Watch counts per session and per tenant."""

from __future__ import annotations

import pytest

from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.service._watchers import Watchers


def test_a_session_past_its_bound_is_refused_and_counts_nothing() -> None:
    watchers = Watchers(per_session=2, per_tenant=10)
    with watchers.watching("t", "s"), watchers.watching("t", "s"):
        with pytest.raises(ServiceError) as refused, watchers.watching("t", "s"):
            pass
        assert refused.value.reason == Reason.LIMIT_EXCEEDED
        assert refused.value.metadata["limit"] == "watchers_per_session"
        assert watchers.count("t", "s") == 2
        with watchers.watching("t", "other"):
            assert watchers.count("t") == 3
    assert watchers.count("t") == 0
    assert watchers.count("t", "s") == 0


def test_a_tenant_past_its_bound_is_refused() -> None:
    watchers = Watchers(per_session=5, per_tenant=2)
    with watchers.watching("t", "a"), watchers.watching("t", "b"):
        with pytest.raises(ServiceError) as refused, watchers.watching("t", "c"):
            pass
        assert refused.value.metadata["limit"] == "watchers_per_tenant"
        with watchers.watching("u", "a"):  # another tenant has its own count
            assert watchers.count("u") == 1
