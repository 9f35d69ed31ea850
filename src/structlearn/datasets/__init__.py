"""Data sets: locating the real data and loaders."""
from structlearn.datasets._base import get_data_path
from structlearn.datasets.activities import placelab_two_level, simulate_indoor_tracks
from structlearn.datasets.conll import load_conll2000, load_conll2002
from structlearn.datasets.hsmm_data import load_ordonez, load_reprocows

__all__ = ["get_data_path", "load_conll2000", "load_conll2002", "load_ordonez", "load_reprocows",
           "placelab_two_level", "simulate_indoor_tracks"]
