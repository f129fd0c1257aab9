"""Evals: how good Hermes's answers and investigations are, per model, measured on cases.

A case (`evals/cases/*.yaml`, `evals.cases`) is a question, a signal or a short conversation, the
oikos_sim world it runs against, and what a good answer must and must not do. `manage.py eval`
runs cases on the real turn engine, checks what can be checked without a model, has a judge model
score each expected fact and forbidden claim, and stores every result with its transcript.
"""
