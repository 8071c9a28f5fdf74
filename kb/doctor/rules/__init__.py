"""The lint rules, one module per concern (core, frontends, types, sites); each imports only the engine
(``kb.doctor.engine``) and registers its rules with ``kb.doctor.engine.rule`` when imported. The entry point
``kb.doctor.lint`` imports them all."""
