"""Model -> layer graph -> per-layer placement over working cores -> plan."""
