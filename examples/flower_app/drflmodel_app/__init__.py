"""drflmodel's algorithms as a Flower App (configured by ../problem.toml)."""
