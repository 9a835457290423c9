"""The CPU made to stand for a device other than it (explorer.run.device_layers.HOST emptied), every copy back to the
host (device_layers.host) counted: what the device tests assert never comes back whole."""

from __future__ import annotations

from attention_explorer.explorer.run import device_layers


def count_copies(monkeypatch) -> list[tuple[int, ...]]:
    """The shapes copied back from the stand-in device from now on, in order (monkeypatch undoes it)."""
    copied: list[tuple[int, ...]] = []

    def counted_host(tensor):
        copied.append(tuple(tensor.shape))
        return tensor.detach().cpu().numpy()

    monkeypatch.setattr(device_layers, "HOST", ())
    monkeypatch.setattr(device_layers, "host", counted_host)
    return copied
