"""What a fetch leaves on disk.

* ``warc.py``: :class:`WarcWriter`, rotating ``.warc.gz`` files of one gzip member per
  record, and :class:`WarcLocation`, where a response record starts;
* ``warc_records.py``: a fetch's response and request records, serialized by hand (why: its
  docstring);
* ``cdxj.py``: the CDXJ index beside each WARC file, written as records are, sorted when the
  file closes (docs/archive.md);
* ``jsonl.py``: :class:`RecordWriter`, the JSONL record of each URL's outcome;
* ``digest.py``: :func:`content_digest`, the exact content fingerprint.
"""
