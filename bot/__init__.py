"""Chat surfaces (Discord, Slack). Not built yet: each will turn a platform event into
``kb.ask.engine.Engine.ask`` and the answer into a platform payload, with no logic of its own."""
