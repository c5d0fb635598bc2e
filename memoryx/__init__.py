"""The weight store, edge streaming, optimizer, checkpoints, SwarmX."""
