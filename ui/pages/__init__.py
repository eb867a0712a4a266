"""The app's pages (one folder each): simulation, inspector, tour, training, real model."""
