# syntax=docker/dockerfile:1

# Build: docker build -t agentskit-chat .
# Run, with tokens.yaml holding the SHA-256 digests of the clients' bearer tokens (README.md,
# "Container", shows how to make one; it must be readable by uid 10001):
#   docker run -p 50051:50051 -v agentskit-chat-state:/var/lib/agentskit-chat \
#     -v "$PWD/tokens.yaml:/etc/agentskit-chat/tokens.yaml:ro" \
#     -e AGENTSKIT_CHAT_AUTH_TOKENS=/etc/agentskit-chat/tokens.yaml agentskit-chat

FROM python:3.11-slim AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /src

COPY client/python ./client/python
COPY pyproject.toml README.md ./
COPY server ./server

RUN pip wheel --no-cache-dir --wheel-dir /wheels ./client/python .


FROM python:3.11-slim AS runtime

LABEL org.opencontainers.image.title="agentskit-chat" \
      org.opencontainers.image.description="Session service for conversational applications over gRPC."

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/*.whl

RUN groupadd --system --gid 10001 agentskit \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin agentskit \
    && mkdir -p /var/lib/agentskit-chat \
    && chown 10001:10001 /var/lib/agentskit-chat \
    && chmod 0750 /var/lib/agentskit-chat

WORKDIR /app
COPY examples/definitions /app/definitions

# Listening beyond loopback needs tokens: mount a tokens file and set
# AGENTSKIT_CHAT_AUTH_TOKENS to its path (the run line above; see SECURITY.md). Without
# them, serve refuses to start; `serve --insecure-no-auth` is only for a server that
# something in front authenticates callers for (a mesh with mTLS and authorization).
ENV AGENTSKIT_CHAT_LISTEN=0.0.0.0:50051 \
    AGENTSKIT_CHAT_DEFINITIONS=/app/definitions \
    AGENTSKIT_CHAT_STATE_DIR=/var/lib/agentskit-chat

VOLUME ["/var/lib/agentskit-chat"]
EXPOSE 50051
USER 10001:10001

STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "agentskit_chat.healthcheck", "--timeout", "3"]

ENTRYPOINT ["agentskit-chat"]
CMD ["serve"]
