"""Code every service uses (none of it is a service: services never import each other)."""
