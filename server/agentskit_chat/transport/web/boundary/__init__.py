"""What every front of the HTTP listener shares: the ASGI types, routing, tokens, bodies and
errors of a front call, CORS, connection bounds, the refusal log, the screen before
routing, static files and the flow control of streamed responses. Nothing here decides
anything a turn does."""
