"""The `ringkv` console command of the platform wheel: runs the CLI the wheel bundles.

The wheel built by `pip wheel ./python` carries the C++ CLI, its plugin worker and its data as an
installed tree under ringkv/_data (bin/, share/ringkv/golden, share/ringkv/profiles, include/), so the
CLI finds its worker and its golden set relative to itself, as the installed tree does. A pure-Python
wheel (built with -C wheel.cmake=false) has no bundled CLI: then this command says so.
"""
import os
import sys

BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_data")
BUNDLED_CLI = os.path.join(BUNDLED_DIR, "bin", "ringkv")


def bundled_cli():
    """The path of the CLI this wheel bundles, or None (a pure-Python wheel, or the source tree)."""
    return BUNDLED_CLI if os.path.isfile(BUNDLED_CLI) and os.access(BUNDLED_CLI, os.X_OK) else None


def main():
    exe = bundled_cli()
    if exe is None:
        sys.stderr.write("ringkv: this installation of the ringkv package carries no CLI (a pure-Python wheel): "
                         "install the platform wheel (pip wheel ./python), or use an installed tree's bin/ringkv\n")
        return 2
    os.execv(exe, [exe] + sys.argv[1:])
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
