"""Hermes's memory of the homelab: operators' notes and runbooks (`notes`), recalled into every
turn whose question they match (`recall`), proposed from a conversation and saved by an operator's
click (`notes.note_propose`, the built-in tool in `tool`)."""
