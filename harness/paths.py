"""Where the checkout's own folders are, whatever the working directory."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
GUEST_DIR = REPO_ROOT / "guest"  # templates, Kconfig fragments, package lists
IMAGES_DIR = REPO_ROOT / "images"  # links to the current builds
