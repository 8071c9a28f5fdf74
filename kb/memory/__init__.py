"""`kb mem`: what the GPU and the host hold, phase by phase, for a training setup."""
