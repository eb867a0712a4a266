"""The Experiments page: grids of training runs (engine.experiments) built, run and watched."""
