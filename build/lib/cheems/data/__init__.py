"""The record format: schema, reading and writing, importers, statistics.

Names are imported on first use (:func:`cheems.runtime.lazy_exports`), so reading a settings model
at CLI start-up does not import the readers and writers.
"""

from cheems.runtime import lazy_exports

_EXPORTS = {
    "Comparison": "schema",
    "Message": "schema",
    "ReadResult": "io",
    "Record": "schema",
    "Response": "schema",
    "read_records": "io",
    "read_scores": "io",
    "write_records": "io",
    "write_scores": "io",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
