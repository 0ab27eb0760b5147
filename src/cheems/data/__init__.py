"""The record format: schema, reading and writing, importers, statistics."""

from cheems.data.io import ReadResult, read_records, read_scores, write_records, write_scores
from cheems.data.schema import Comparison, Message, Record, Response

__all__ = [
    "Comparison",
    "Message",
    "ReadResult",
    "Record",
    "Response",
    "read_records",
    "read_scores",
    "write_records",
    "write_scores",
]
