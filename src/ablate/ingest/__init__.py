"""Your own documents as an ablate corpus folder (``python -m ablate.ingest DOCS --out CORPUS``; docs/ingest.md).

Readers (:mod:`~ablate.ingest.readers`) turn Markdown, plain text, HTML, Word and PDF files into blocks
(:mod:`~ablate.ingest.blocks`); sections are found from headings, numbered clauses (:mod:`~ablate.ingest.clauses`)
and tables (:mod:`~ablate.ingest.tables`); ids come from file names (:mod:`~ablate.ingest.ids`) and metadata from
front matter or sidecar files (:mod:`~ablate.ingest.metadata`); :mod:`~ablate.ingest.build` puts a document
together and :mod:`~ablate.ingest.write` writes the folder. A data-layer package: it imports ``ablate.data`` and the
base modules only.
"""
