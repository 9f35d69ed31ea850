"""Online trainers (placeholder, filled below)."""
