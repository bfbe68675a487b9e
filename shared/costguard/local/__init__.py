"""The local path: an embedded AWS (moto) seeded from a world file, replay, demo and redrive."""
