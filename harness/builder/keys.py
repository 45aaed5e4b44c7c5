"""The bench's SSH identity: one Ed25519 key pair per cache, generated on first use.

The public half is baked into every rootfs built from that cache; root logs in
with the private half only (no passwords)::

    pair = ensure_keypair(cache.root / "ssh")
    pair.private_key      # Path for paramiko
    pair.public_line      # 'ssh-ed25519 AAAA... profbench'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True, slots=True)
class KeyPair:
    """Paths and text of the bench's SSH key."""

    private_key: Path
    public_line: str


def ensure_keypair(directory: Path) -> KeyPair:
    """Return the key pair in ``directory``, creating it atomically if absent."""
    private = directory / "id_ed25519"
    public = directory / "id_ed25519.pub"
    if not (private.is_file() and public.is_file()):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        line = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        tmp = directory / f".id_ed25519.{os.getpid()}"
        tmp.write_bytes(pem)
        tmp.chmod(0o600)
        (directory / f".id_ed25519.pub.{os.getpid()}").write_text(line.decode() + " profbench\n")
        (directory / f".id_ed25519.pub.{os.getpid()}").replace(public)
        tmp.replace(private)  # last: its presence means the pair is complete
    return KeyPair(private, public.read_text().strip())
