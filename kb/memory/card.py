"""The GPU kb assumes when the user does not say: its one home (kb mem, kb lint, the setup model, the bots)."""

DEFAULT_GPU_MEM_GIB = 80.0  # A100 / H100 80 GB
