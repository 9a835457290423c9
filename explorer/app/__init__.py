"""The app's plumbing: the only caches, session state and the address, callbacks, clicks, downloads, memory."""
