"""Evaluation metrics: conlleval chunk scores and sklearn-crfsuite's flat token metrics."""
from .flat import (flat_accuracy_score, flat_classification_report, flat_f1_score, flat_fbeta_score,
                   flat_precision_score, flat_recall_score, sequence_accuracy_score)
from .sequence import (chunk_f1, classification_report, conlleval, labels_from_segments, segments_from_labels,
                       token_accuracy, token_report)

__all__ = ["conlleval", "chunk_f1", "token_accuracy", "token_report", "classification_report",
           "segments_from_labels", "labels_from_segments", "flat_accuracy_score", "flat_f1_score",
           "flat_precision_score", "flat_recall_score", "flat_fbeta_score", "flat_classification_report",
           "sequence_accuracy_score"]
