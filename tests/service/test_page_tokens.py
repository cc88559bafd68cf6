"""Page tokens: signed, bound to one stored session, fixed-size, refused whole otherwise."""

from __future__ import annotations

import base64
import json

import pytest

from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.service._page_tokens import PAGE_TOKEN_CHARS, PageScope, PageTokens

KEY = b"page-token-tests-deployment-key!"
TOKENS = PageTokens(KEY)
SCOPE = TOKENS.scope("tenant-a", "s1", "incarnation-1")


def refused(scope: PageScope, token: str) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        scope.read(token)
    error = caught.value
    assert error.reason is Reason.INVALID_ARGUMENT
    assert dict(error.metadata) == {"field": "page_token"}
    return error


def test_a_token_reads_back_its_anchor_and_is_opaque_and_url_safe() -> None:
    token = SCOPE.issue("turn-7", running=True)
    assert len(token) == PAGE_TOKEN_CHARS
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert "turn-7" not in token
    assert b"turn-7" not in base64.urlsafe_b64decode(token + "=")
    anchor = SCOPE.read(token)
    assert anchor.running
    assert anchor.names("turn-7")
    assert not anchor.names("turn-8")
    assert not SCOPE.read(SCOPE.issue("turn-7", running=False)).running
    long_id = SCOPE.issue("t" * 10_000, running=False)  # any id: the size never changes
    assert len(long_id) == PAGE_TOKEN_CHARS
    assert SCOPE.read(long_id).names("t" * 10_000)


@pytest.mark.parametrize(
    "other",
    [
        TOKENS.scope("tenant-b", "s1", "incarnation-1"),  # another tenant's session of this id
        TOKENS.scope("tenant-a", "s2", "incarnation-1"),  # another session
        TOKENS.scope("tenant-a", "s1", "incarnation-2"),  # this id deleted and created again
        TOKENS.scope("tenant-as", "1", "incarnation-1"),  # the same bytes framed otherwise
        PageTokens(b"another-deployment-key-32-bytes!").scope("tenant-a", "s1", "incarnation-1"),
    ],
)
def test_a_token_of_another_scope_or_key_is_refused(other: PageScope) -> None:
    token = SCOPE.issue("turn-1", running=False)
    same = refused(other, token)
    assert same.message == refused(other, "not-a-token").message  # one answer for every refusal


def test_every_altered_character_is_refused() -> None:
    token = SCOPE.issue("turn-1", running=False)
    alphabet = "ABEQgw-_"  # every bit of a base64 digit, the unused low bits of the last too
    for index in range(len(token)):
        for replacement in alphabet:
            if token[index] != replacement:
                refused(SCOPE, token[:index] + replacement + token[index + 1 :])


@pytest.mark.parametrize(
    "token",
    [
        "",
        "e30",
        base64.urlsafe_b64encode(json.dumps({"v": 1, "s": "s1", "t": "t", "r": False}).encode())
        .decode()
        .rstrip("="),
        base64.urlsafe_b64encode(b"[" * 100_000).decode(),  # nested beyond any recursion limit
        "A" * PAGE_TOKEN_CHARS * 1000,
        "A" * (PAGE_TOKEN_CHARS - 1),
        "A" * (PAGE_TOKEN_CHARS + 1),
        "=" * PAGE_TOKEN_CHARS,
        "é" * PAGE_TOKEN_CHARS,
        "A" * (PAGE_TOKEN_CHARS - 1) + "\n",
        "A" * PAGE_TOKEN_CHARS,  # the right shape, unsigned
    ],
)
def test_tokens_this_server_did_not_issue_are_refused(token: str) -> None:
    error = refused(SCOPE, token)
    assert error.message == "page_token is not a token this server issued for this session"
