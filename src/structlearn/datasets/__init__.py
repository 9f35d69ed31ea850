"""Data sets: locating the real data and loaders."""
from ._base import get_data_path
from .activities import placelab_two_level, simulate_indoor_tracks
from .conll import load_conll2000, load_conll2002
from .hsmm_data import load_ordonez, load_reprocows

__all__ = ["get_data_path", "load_conll2000", "load_conll2002", "load_ordonez", "load_reprocows",
           "placelab_two_level", "simulate_indoor_tracks"]
