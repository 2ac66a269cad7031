"""Carcassonne rules engine: pure, standard library only, folded by every service."""
