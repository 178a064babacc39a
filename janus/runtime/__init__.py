"""What converted code calls at trace time (operators), the op loader (ops), the whitelist."""
