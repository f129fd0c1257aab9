"""Hermes as an A2A server: A2A 1.0 (through `a2a-sdk`) and GarraIA's dialect over one core."""
