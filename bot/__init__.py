"""Chat surfaces (Discord, Slack): a platform event becomes a request to ``bot.service`` (the engine and the typed
reports), and a reply becomes a platform payload through the neutral layout (``bot.layout``, ``bot.chat``)."""
