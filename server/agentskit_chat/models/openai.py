"""The `openai` adapter: Chat Completions streamed over HTTP, as OpenAI, Ollama and vLLM serve it.

One httpx connection pool per base URL is shared by every adapter of that endpoint. A call
is retried at most once, only before its first chunk, and only after a failure that may
pass (unreachable, 5xx, 429 within the wait cap, timeout). Closing the stream closes the
HTTP response at once. The stream also ends at `[DONE]`, without waiting for the end of the
response: its connection serves another call only when the rest of the body had already
arrived, and is closed otherwise.

Each request carries the current W3C trace context (`traceparent`, `tracestate`) through
the OpenTelemetry API's global propagator, so a model server that traces joins the turn's
trace under the model call's span; without telemetry the API has nothing to inject.

Declared tools go upstream in the OpenAI `tools` shape, with the history's tool calls and
results; the answer's streamed tool calls come back as tool call chunks (`_openai_tools`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any, Final

import httpx
from opentelemetry import propagate

from agentskit_chat import __version__

from ._openai_protocol import (
    CREDENTIALS_INVALID,
    CREDENTIALS_MISSING,
    DONE,
    FAILED,
    PROTOCOL_ERROR,
    SERVER_ERROR,
    AttemptError,
    check_response,
    fail,
    parse_chunk,
    request_body,
    transport_failure,
)
from ._openai_settings import OpenAISettings, parse_settings
from ._openai_tools import ToolCallState
from ._port import CallInfo, FinishChunk, ModelChunk, ModelError, ModelRequest, ResponseChunk
from ._sse import EventStreamError, EventStreamParser, ServerEvent, TruncatedEventError

RETRY_DELAY: Final = 0.25
"""Seconds before the single retry when the upstream gave no Retry-After."""
MAX_RETRY_WAIT: Final = 2.0
"""A longer Retry-After fails the call instead of waiting."""
LIMITS: Final = httpx.Limits(max_connections=None, max_keepalive_connections=64)


class ClientPool:
    """One httpx.AsyncClient per base URL, closed when its last adapter is closed."""

    def __init__(self) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._users: dict[str, int] = {}

    def acquire(self, base_url: str) -> httpx.AsyncClient:
        """The client of `base_url`, created on first use; pair with `release`."""
        client = self._clients.get(base_url)
        if client is None or client.is_closed:
            client = self._clients[base_url] = httpx.AsyncClient(
                limits=LIMITS, headers={"user-agent": f"agentskit-chat/{__version__}"}
            )
            self._users[base_url] = 0
        self._users[base_url] += 1
        return client

    async def release(self, base_url: str) -> None:
        """One user fewer; the last one closes the client and its connections."""
        users = self._users.get(base_url, 0) - 1
        if users > 0:
            self._users[base_url] = users
            return
        self._users.pop(base_url, None)
        client = self._clients.pop(base_url, None)
        if client is not None:
            await client.aclose()


class OpenAIAdapter:
    """Streams agentic turns from a Chat Completions endpoint."""

    name = "openai"

    def __init__(
        self,
        settings: Mapping[str, Any] | OpenAISettings,
        *,
        pool: ClientPool | None = None,
        retry_delay: float = RETRY_DELAY,
        max_retry_wait: float = MAX_RETRY_WAIT,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not isinstance(settings, OpenAISettings):
            settings = parse_settings(settings)
        self.settings = settings
        self.provider = self.settings.provider
        self._pool = pool or ClientPool()
        self._url = f"{self.settings.base_url}/chat/completions"
        self._timeout = httpx.Timeout(self.settings.timeout)
        self._retry_delay = retry_delay
        self._max_retry_wait = max_retry_wait
        self._sleep = sleep
        self._client: httpx.AsyncClient | None = None
        endpoint = httpx.URL(self.settings.base_url)
        self.call_info = CallInfo(
            server_address=endpoint.host,
            server_port=endpoint.port or (443 if endpoint.scheme == "https" else 80),
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
        )

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self.settings.model

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client of this adapter's base URL, shared with its other adapters."""
        if self._client is None:
            self._client = self._pool.acquire(self.settings.base_url)
        return self._client

    async def close(self) -> None:
        """Give the shared client back; the last adapter of a base URL closes it."""
        if self._client is not None:
            self._client = None
            await self._pool.release(self.settings.base_url)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """The answer's chunks as they arrive; ModelError on failure."""
        body = request_body(self.settings, request.messages, request.sampling, request.tools)
        headers = self._headers()
        propagate.inject(headers)
        for attempt in (1, 2):
            yielded = False
            try:
                async with aclosing(self._attempt(body, headers)) as chunks:
                    async for chunk in chunks:
                        yielded = True
                        yield chunk
                return
            except AttemptError as failure:
                wait = None if yielded or attempt > 1 else self._retry_wait(failure)
                if wait is None:
                    raise failure.error from None
            await self._sleep(wait)

    def _retry_wait(self, failure: AttemptError) -> float | None:
        """Seconds to wait before the retry; None when the failure is not worth one."""
        if not failure.error.retryable:
            return None
        wait = self._retry_delay if failure.retry_after is None else failure.retry_after
        return wait if wait <= self._max_retry_wait else None

    def _headers(self) -> httpx.Headers:
        headers = httpx.Headers(
            {
                "accept": "text/event-stream",
                "accept-encoding": "identity",
                "content-type": "application/json",
            }
        )
        for name, value in self.settings.headers:
            headers[name] = value
        variable = self.settings.api_key_env
        if variable is not None:
            key = os.environ.get(variable, "").strip()
            if not key:
                raise ModelError(
                    CREDENTIALS_MISSING, "the model's API key is not set", retryable=False
                )
            if not key.isascii() or not key.isprintable() or " " in key:
                raise ModelError(
                    CREDENTIALS_INVALID, "the model's API key is not usable", retryable=False
                )
            headers["authorization"] = f"Bearer {key}"
        return headers

    async def _attempt(
        self, body: bytes, headers: httpx.Headers
    ) -> AsyncGenerator[ModelChunk, None]:
        """One HTTP exchange; every failure becomes an AttemptError."""
        answering = suspended = False
        try:
            async with self.client.stream(
                "POST", self._url, content=body, headers=headers, timeout=self._timeout
            ) as response:
                check_response(response)
                answering = True
                received = _Body.wrap(response)
                async with aclosing(_chunks(response, received)) as chunks:
                    async for chunk in chunks:
                        suspended = True
                        yield chunk
                        suspended = False
        except httpx.HTTPError as exc:
            if suspended:  # Closing the response after the consumer left: nothing to report.
                return
            raise transport_failure(exc, answering=answering) from None
        except TruncatedEventError:
            raise fail(PROTOCOL_ERROR, _ENDED_EARLY, retryable=True) from None
        except EventStreamError:
            raise fail(
                PROTOCOL_ERROR, "the model sent a malformed event stream", retryable=False
            ) from None
        except AttemptError:
            raise
        except Exception:
            if suspended:
                return
            raise fail(FAILED, "the model call failed", retryable=False) from None


_ENDED_EARLY: Final = "the model stream ended before it finished"


class _Body(httpx.AsyncByteStream):
    """A response body that, once `patient` is off, only yields what has already arrived.

    A read that would wait for the network is cancelled instead, which closes the connection;
    a body already complete ends normally and leaves its connection to the pool.
    """

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner
        self.patient = True

    @classmethod
    def wrap(cls, response: httpx.Response) -> _Body:
        """Put a _Body around the body of `response`, before anything of it is read."""
        if not isinstance(response.stream, httpx.AsyncByteStream):
            raise TypeError("an async client's response has an async body")
        body = cls(response.stream)
        response.stream = body
        return body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = aiter(self._inner)
        while True:
            try:
                # A deadline already passed: anything that has to wait is cancelled at once.
                async with asyncio.timeout(None if self.patient else 0):
                    part = await anext(parts)
            except StopAsyncIteration:
                return
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _chunks(response: httpx.Response, body: _Body) -> AsyncGenerator[ModelChunk, None]:
    """The model chunks of an event stream, up to `[DONE]`."""
    finished = described = False
    calls = ToolCallState()
    async with aclosing(_events(response)) as events:
        async for event in events:
            if event.data == DONE:
                await _settle(body, events)
                return
            if event.event == "error":
                raise fail(
                    SERVER_ERROR, "the model reported an error in its stream", retryable=True
                )
            for chunk in parse_chunk(event.data, describe=not described, calls=calls):
                described = described or isinstance(chunk, ResponseChunk)
                finished = finished or isinstance(chunk, FinishChunk)
                yield chunk
    if not finished:
        raise fail(PROTOCOL_ERROR, _ENDED_EARLY, retryable=True)


async def _events(response: httpx.Response) -> AsyncGenerator[ServerEvent, None]:
    parser = EventStreamParser()
    async for data in response.aiter_bytes():
        for event in parser.feed(data):
            yield event
    parser.finish()


async def _settle(body: _Body, events: AsyncGenerator[ServerEvent, None]) -> None:
    """Read what has already arrived after `[DONE]`, never waiting for more.

    When that reaches the end of the body, its connection can serve another call; otherwise
    the connection is closed.
    """
    body.patient = False
    with contextlib.suppress(TimeoutError, httpx.HTTPError, EventStreamError):
        async for _ in events:
            pass


class OpenAIFactory:
    """Builds `openai` adapters that share one connection pool per base URL."""

    def __init__(self) -> None:
        self.pool = ClientPool()

    def __call__(self, settings: Mapping[str, Any]) -> OpenAIAdapter:
        """An adapter for `settings`."""
        return OpenAIAdapter(settings, pool=self.pool)

    def check(self, settings: Mapping[str, Any]) -> None:
        """Raise InvalidAdapterSettingsError when `settings` are not usable."""
        parse_settings(settings)
