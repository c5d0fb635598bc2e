"""Numba-JIT cycle-approximate core: routers, links, colors, queues, PE programs."""
