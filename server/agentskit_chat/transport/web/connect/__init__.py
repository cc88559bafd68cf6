"""ChatService over Connect (JSON and binary) and gRPC-Web: the generated interface's
codecs, the prompt response of watches, and the service the listener mounts."""

from ._codecs import CODECS
from ._prompt import PromptHeaders
from ._service import Authentication, ConnectChatService

__all__ = ["CODECS", "Authentication", "ConnectChatService", "PromptHeaders"]
