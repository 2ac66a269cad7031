"""The services of Carcassonne Cloud (each a package; they never import each other)."""
