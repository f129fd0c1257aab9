"""Search over everything Hermes saw: questions, answers, tool arguments and tool results.

`entries` says what of a question, an answer or a tool call is searchable: one `SearchEntry` each,
written by the services in the transaction of the row it indexes (`message_entry`,
`activity_entry`, and `search_result_addition` once a call's result is in) and rebuilt whole by
`manage.py search_reindex`. Its text is redacted, and a configured secret never reaches the index.
`query` asks the database's own full-text engine — PostgreSQL's tsvector with a GIN index,
SQLite's FTS5 — for ranked hits with highlighted snippets.
"""
