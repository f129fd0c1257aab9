"""Search over everything Hermes saw: questions, answers, tool arguments and tool results.

`entries` keeps one `SearchEntry` per question, answer and tool call, written by the services right
after the row it indexes (one call per write: `search_index_message`, `search_index_tool_call`,
`search_index_tool_result`) and rebuilt whole by `manage.py search_reindex`. Its text is redacted,
and a configured secret never reaches the index. `query` asks the database's own full-text engine
— PostgreSQL's tsvector with a GIN index, SQLite's FTS5 — for ranked hits with highlighted
snippets.
"""
