"""AgentsKit Chat: deterministic routes, a conversation statechart and model delegation."""

__version__ = "0.1.0"
