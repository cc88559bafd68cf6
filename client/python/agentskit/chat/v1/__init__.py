"""Generated protobuf packages of the AgentsKit Chat contract."""
