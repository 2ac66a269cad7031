"""Developer tools that drive a running suite from outside: `make demo` and its game client."""
