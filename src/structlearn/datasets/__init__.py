"""Data sets: locating the real data and loaders."""
from ._base import get_data_path

__all__ = ["get_data_path"]
