"""Dependency edge sets, one family of modules per producer (`hta*.py`: HTA in its own env)."""
