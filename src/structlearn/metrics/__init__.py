"""Evaluation metrics."""
from .sequence import (chunk_f1, classification_report, conlleval, labels_from_segments,
                       segments_from_labels, token_accuracy, token_report)

__all__ = ["conlleval", "chunk_f1", "token_accuracy", "token_report", "classification_report",
           "segments_from_labels", "labels_from_segments"]
