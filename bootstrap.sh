# Source me: `. ./bootstrap.sh` makes .venv (Python deps from PyPI) and activates it.
# Debian packages (QEMU, cross compiler, kernel source) are installed by the
# invoke tasks themselves, through apt, when they find them missing.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    # Debian's own python3 ships venv support separately.
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' &&
    . .venv/bin/activate
