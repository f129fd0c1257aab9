"""Access control: which networks may connect, who is asking, and the browser-facing hardening."""
