"""Seed data: the homelab every oikos_sim start loads (``homelab.world_seed``)."""
